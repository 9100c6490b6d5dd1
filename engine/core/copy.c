/* Copies with broadcast and dtype conversion, fills: the dispatch behind
 * contiguous(), clone(), copy_(), to() and creation, within a device (its
 * backend's copy / fill kernels) and across devices (one transfer). */
#include "device.h"
#include "hooks.h"

/* dst and src on different devices (shapes checked): the bytes cross once,
 * as a contiguous block in dst's dtype and shape, converted and broadcast
 * on the source's device and scattered into a strided dst on its own. */
static tn_status copy_across(tn_tensor *dst, const tn_tensor *src) {
    bool direct = src->dtype == dst->dtype && tn__same_shape(src, dst) && tn__is_contiguous(src);
    tn_tensor *stage =
        direct ? tn__retain(src) : tn__empty_on(dst->ndim, dst->shape, dst->dtype, tn__dev(src));
    tn_status st = stage ? TN_OK : tn_last_status();
    if (st == TN_OK && !direct) st = tn__copy_into(stage, src);
    tn_tensor *land = NULL;
    if (st == TN_OK) {
        land = tn__is_contiguous(dst) ? tn__retain(dst) : tn__empty_like(dst);
        st = land ? tn__dev_transfer(land, stage) : tn_last_status();
    }
    if (st == TN_OK && land != dst) st = tn__copy_into(dst, land);
    tn_release(land);
    tn_release(stage);
    if (st == TN_OK) tn__storage_wrote(dst->storage);
    return st;
}

tn_status tn__copy_into(tn_tensor *dst, const tn_tensor *src) {
    tn_status st = tn__check_broadcast_into(dst, src->ndim, src->shape);
    if (st < 0) return st;
    if (!tn__same_device(tn__dev(dst), tn__dev(src))) return copy_across(dst, src);
    const tn_backend *be = tn__table_of(tn__dev(dst));
    if (!be) return tn_last_status();
    tn_tensor *const ops[2] = {dst, (tn_tensor *)src};
    tn_iter it;
    tn__iter_init(&it, 2, ops);
    if (it.numel == 0) return TN_OK; /* empty: no kernel on any back end */
    tn_race_access ra; /* dst written, src read */
    tn__race_begin(&ra, 2, (const tn_tensor *const *)ops, 1u, "elementwise");
    st = be->copy(tn__dev(dst).index, dst->dtype, src->dtype, &it);
    tn__race_end(&ra);
    if (st < 0) return st;
    tn__storage_wrote(dst->storage);
    return TN_OK;
}

tn_tensor *tn__copy_to_device(const tn_tensor *src, tn_dtype dt, tn_device dev) {
    tn_tensor *t = tn__empty_on(src->ndim, src->shape, dt, dev);
    if (t && tn__copy_into(t, src) < 0) {
        tn_release(t);
        return NULL;
    }
    return t;
}

tn_tensor *tn__copy_as(const tn_tensor *src, tn_dtype dt) {
    return tn__copy_to_device(src, dt, tn__dev(src));
}

tn_tensor *tn__contiguous_on(const tn_tensor *t, tn_device d) {
    if (tn__same_device(tn__dev(t), d) && tn__is_contiguous(t)) return tn__retain(t);
    return tn__copy_to_device(t, t->dtype, d);
}

tn_tensor *tn__cast(const tn_tensor *src, tn_dtype dt) {
    if (src->dtype == dt) return tn__retain(src);
    return tn__copy_as(src, dt);
}

tn_status tn__fill_into(tn_tensor *dst, double v) {
    const tn_backend *be = tn__table_of(tn__dev(dst));
    if (!be) return tn_last_status();
    tn_iter it;
    tn__iter_init(&it, 1, &dst);
    if (it.numel == 0) return TN_OK;
    tn_race_access ra; /* dst written */
    tn__race_begin(&ra, 1, (const tn_tensor *const *)&dst, 1u, "elementwise");
    tn_status st = be->fill(tn__dev(dst).index, dst->dtype, &it, v);
    tn__race_end(&ra);
    if (st < 0) return st;
    tn__storage_wrote(dst->storage);
    return TN_OK;
}
