/* Custom autograd functions (include/tenet/function.h): torch.autograd.Function.
 *
 * tn_function_apply runs the user's forward with grad mode off, as engine
 * code (nothing it makes goes into a scope), then wraps the outputs as
 * PyTorch's _wrap_outputs does: one node whose fn is a tn_fn_info made for
 * this call, inside the call's state, so that the node's name is the user's
 * and its backward finds the state from n->fn. tn__node_release frees the
 * state with the node (tn__function_node_free).
 *
 * Everything that can fail (aliases, the node, autograd metas, CopySlices
 * for a view written in place) is made before anything is changed; then the
 * commit bumps the dirty inputs' versions, gives the outputs their history
 * and saves the tensors, none of which can fail. Handing the outputs to the
 * caller's scope comes last.
 *
 * Node layout: inputs as given (edges to their histories), n_saved the
 * tensors of save_for_backward in order, n_out the outputs. Its backward
 * (tn__function_backward) calls the user's, checks the number, shape and
 * device of its gradients (PyTorch's texts) and, for a once-differentiable
 * function under create_graph, hides them behind an "Error" node.
 */
#include <stddef.h>

#include "autograd_internal.h"

#define LEAF_DIRTY_MSG "a leaf Variable that requires grad has been used in an in-place operation."
#define VIEW_LEAF_MSG                                                                              \
    "a view of a leaf Variable that requires grad is being used in an in-place operation."
#define ONCE_MSG                                                                                   \
    "trying to differentiate twice a function that was marked with @once_differentiable"

/* Lives as long as the node (or the call, when nothing is recorded). Read
 * only once apply returns: backward may run on several threads at once. */
typedef struct fn_state {
    tn_fn_info info; /* first: the node's fn points here */
    tn_function desc;
    int n_in, n_out;
    void *data;
    void (*free_data)(void *data);
    bool needs_input_grad[]; /* n_in */
} fn_state;

/* A growable list of tensor handles, each retained (NULL entries allowed). */
typedef struct handle_list {
    tn_tensor **v;
    int n, cap;
} handle_list;

struct tn_function_ctx {
    fn_state *s;
    tn_node *node; /* backward: the node running */
    bool forward;
    /* forward only */
    tn_tensor *const *inputs;
    bool recording; /* grad mode on and an input requires grad */
    handle_list saved, dirty, nondiff;
};

static fn_state *state_of(const tn_node *n) { return (fn_state *)(void *)n->fn; }

static void state_free(fn_state *s) {
    if (!s) return;
    if (s->free_data) s->free_data(s->data);
    tn__mfree(s);
}

void tn__function_node_free(tn_node *n) { state_free(state_of(n)); }

/* ---- handle lists ------------------------------------------------------------------- */

static bool list_has(const handle_list *l, const tn_tensor *t) {
    for (int i = 0; i < l->n; i++)
        if (l->v[i] == t) return true;
    return false;
}

static tn_status list_push(handle_list *l, tn_tensor *t) {
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 4;
        tn_tensor **v = tn__realloc(l->v, (size_t)cap * sizeof *v);
        if (!v) return TN_ERR_OUT_OF_MEMORY;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = t ? tn__retain(t) : NULL;
    return TN_OK;
}

static void list_clear(handle_list *l) {
    for (int i = 0; i < l->n; i++)
        tn_release(l->v[i]);
    tn__mfree(l->v);
    *l = (handle_list){0};
}

/* ---- the context ---------------------------------------------------------------------- */

static tn_status ctx_phase(const tn_function_ctx *ctx, bool forward, const char *fn) {
    if (!ctx) return tn__error(TN_ERR_INVALID_ARGUMENT, "%s: argument 'ctx' is NULL", fn);
    if (ctx->forward != forward)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "%s: may only be called from %s", fn,
                         forward ? "forward" : "backward");
    return TN_OK;
}

static int input_index(const tn_function_ctx *ctx, const tn_tensor *t) {
    for (int i = 0; i < ctx->s->n_in; i++)
        if (ctx->inputs[i] == t) return i;
    return -1;
}

tn_status tn_function_save_for_backward(tn_function_ctx *ctx, int n, tn_tensor *const *tensors) {
    tn_status st = ctx_phase(ctx, true, __func__);
    if (st < 0) return st;
    if (n < 0 || (n > 0 && !tensors))
        return tn__error(TN_ERR_INVALID_ARGUMENT, "%s: bad tensor list (n = %d)", __func__, n);
    handle_list l = {0};
    tn__internal_enter();
    for (int i = 0; i < n && st == TN_OK; i++)
        st = list_push(&l, tensors[i]);
    if (st < 0) {
        list_clear(&l);
    } else { /* replaces an earlier call's, as PyTorch */
        list_clear(&ctx->saved);
        ctx->saved = l;
    }
    tn__internal_leave();
    return st;
}

/* PyTorch's rules for an input written in place while recording, checked
 * before the write; our CopySlices takes a view written in place as its
 * node's first input and one output. */
static tn_status dirty_check(const tn_function_ctx *ctx, const tn_tensor *t, int idx) {
    const fn_state *s = ctx->s;
    if (!t->view_base) {
        if (tn__requires_grad(t) && !t->ag->grad_fn)
            return tn__error(TN_ERR_AUTOGRAD, LEAF_DIRTY_MSG);
        return TN_OK;
    }
    const tn_tensor *b = t->view_base;
    if (tn__requires_grad(b) && !b->ag->grad_fn) return tn__error(TN_ERR_AUTOGRAD, VIEW_LEAF_MSG);
    if (s->n_out > 1)
        return tn__error(
            TN_ERR_AUTOGRAD,
            "If your Function modifies inplace an input that is a view of another Tensor, your "
            "Function cannot return more than one Tensor. This is not supported by the current "
            "autograd engine. You should either make sure the input is not a view (using "
            ".clone() for example) or make your Function only return one Tensor (potentially "
            "splitting it into two Functions: one doing the inplace that returns a single Tensor "
            "and a second one that does the other operations). You can ask on the forum "
            "https://discuss.pytorch.org/ if you need help to do this change.");
    if (idx != 0)
        return tn__error(TN_ERR_AUTOGRAD,
                         "%s: an input modified in place that is a view of another tensor must be "
                         "the function's first input (it is input %d); reorder the inputs or "
                         "clone the view",
                         s->desc.name, idx);
    if (s->n_in > 8)
        return tn__error(TN_ERR_AUTOGRAD,
                         "%s: a function that modifies a view in place may have at most 8 inputs",
                         s->desc.name);
    return TN_OK;
}

tn_status tn_function_mark_dirty(tn_function_ctx *ctx, tn_tensor *t) {
    tn_status st = ctx_phase(ctx, true, __func__);
    if (st < 0) return st;
    TN_CHECK_NULL_ARG_ST(t, "t");
    int idx = input_index(ctx, t);
    if (idx < 0)
        tn__warn("Only input Tensors should be given to ctx.mark_dirty(). If a Tensor is not an "
                 "input, there is no need to pass it to mark_dirty().");
    else if (ctx->recording && !list_has(&ctx->nondiff, t) && (st = dirty_check(ctx, t, idx)) < 0)
        return st;
    return list_has(&ctx->dirty, t) ? TN_OK : list_push(&ctx->dirty, t);
}

tn_status tn_function_mark_non_differentiable(tn_function_ctx *ctx, tn_tensor *t) {
    tn_status st = ctx_phase(ctx, true, __func__);
    if (st < 0) return st;
    TN_CHECK_NULL_ARG_ST(t, "t");
    return list_has(&ctx->nondiff, t) ? TN_OK : list_push(&ctx->nondiff, t);
}

tn_status tn_function_set_data(tn_function_ctx *ctx, void *data, void (*free_data)(void *data)) {
    tn_status st = ctx_phase(ctx, true, __func__);
    if (st < 0) return st;
    fn_state *s = ctx->s;
    if (s->free_data && s->data != data) s->free_data(s->data);
    s->data = data;
    s->free_data = free_data;
    return TN_OK;
}

bool tn_function_needs_input_grad(const tn_function_ctx *ctx, int i) {
    if (!ctx || i < 0 || i >= ctx->s->n_in) {
        tn__error(TN_ERR_INDEX, "%s: no input %d", __func__, i);
        return false;
    }
    return ctx->s->needs_input_grad[i];
}

void *tn_function_data(const tn_function_ctx *ctx) { return ctx ? ctx->s->data : NULL; }
void *tn_function_user(const tn_function_ctx *ctx) { return ctx ? ctx->s->desc.user : NULL; }

int tn_function_saved_count(const tn_function_ctx *ctx) {
    return ctx_phase(ctx, false, __func__) < 0 ? -1 : ctx->node->n_saved;
}

tn_status tn_function_saved_tensors(tn_function_ctx *ctx, int n, tn_tensor **out) {
    tn_status st = ctx_phase(ctx, false, __func__);
    if (st < 0) return st;
    tn_node *node = ctx->node;
    if (!out || n != node->n_saved)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "%s: %s saved %d tensors, asked for %d", __func__,
                         ctx->s->desc.name, node->n_saved, n);
    for (int i = 0; i < n; i++)
        out[i] = NULL;
    for (int i = 0; i < n; i++) {
        if (!node->saved[i].defined) continue; /* NULL was saved */
        /* into the backward's own scope when it opened one, as any returned tensor */
        if ((out[i] = tn__ret(tn__node_unpack(node, i)))) continue;
        st = tn_last_status();
        for (int j = 0; j < i; j++) {
            tn_release(out[j]);
            out[j] = NULL;
        }
        return st;
    }
    return TN_OK;
}

/* ---- forward ---------------------------------------------------------------------------- */

/* A callback failed with st: keep its message, or say which one failed. */
static tn_status callback_failed(tn_status st, const char *name, const char *which) {
    if (tn_last_status() == st) return st;
    return tn__error(st, "%s: %s failed with %s", name, which, tn_status_string(st));
}

static tn_status check_apply_args(const tn_function *fn, int n_in, tn_tensor *const *inputs,
                                  int n_out, tn_tensor **outputs) {
    if (!outputs || n_out < 1)
        return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_function_apply: needs n_out >= 1 outputs");
    for (int k = 0; k < n_out; k++)
        outputs[k] = NULL;
    if (!fn || !fn->name || !fn->forward || !fn->backward)
        return tn__error(TN_ERR_INVALID_ARGUMENT,
                         "tn_function_apply: the function needs a name, a forward and a backward");
    if (n_in < 0 || (n_in > 0 && !inputs))
        return tn__error(TN_ERR_INVALID_ARGUMENT, "tn_function_apply: bad input list (n_in = %d)",
                         n_in);
    for (int i = 0; i < n_in; i++)
        if (!inputs[i]) return tn__null_arg(true, "tn_function_apply: inputs[%d] is NULL", i);
    return TN_OK;
}

static fn_state *state_new(const tn_function *fn, int n_in, tn_tensor *const *inputs, int n_out) {
    fn_state *s = tn__calloc(1, sizeof *s + (size_t)n_in * sizeof(bool));
    if (!s) return NULL;
    s->info = (tn_fn_info){fn->name, tn__function_backward};
    s->desc = *fn;
    s->n_in = n_in;
    s->n_out = n_out;
    for (int i = 0; i < n_in; i++)
        s->needs_input_grad[i] = tn__requires_grad(inputs[i]);
    return s;
}

/* Runs the user's forward: grad mode off, in a callback frame. On failure every
 * reference it left in outputs[] is released. */
static tn_status run_forward(tn_function_ctx *ctx, tn_tensor **outputs) {
    const fn_state *s = ctx->s;
    bool prev = tn_set_grad_enabled(false);
    tn__callback_frame cf;
    tn__callback_enter(&cf);
    /* A NULL output is taken for the result of a failure inside forward (then kept: out of
     * memory, a shape error) only when that failure happened inside it. */
    tn__failed_last = false;
    int r = s->desc.forward(ctx, s->n_in, ctx->inputs, s->n_out, outputs);
    tn_status st = r < 0 ? callback_failed((tn_status)r, s->desc.name, "forward") : TN_OK;
    st = tn__callback_leave(&cf, st, s->n_out, outputs, "a custom function's forward");
    tn__internal_enter();
    for (int k = 0; k < s->n_out && st >= 0; k++)
        if (!outputs[k])
            st = tn__null_arg(true, "%s: forward returned TN_OK but left outputs[%d] NULL",
                              s->desc.name, k);
    for (int k = 0; k < s->n_out && st < 0; k++) {
        tn_release(outputs[k]);
        outputs[k] = NULL;
    }
    tn__internal_leave();
    tn_set_grad_enabled(prev);
    return st < 0 ? st : TN_OK;
}

static const tn_fn_info pending_fn = {"(custom function)", NULL};

/* What becomes of forward's output k. */
typedef struct out_plan {
    tn_tensor *given;        /* forward's reference (owned) */
    tn_tensor *result;       /* what the caller gets (owned): given itself or an alias */
    int input;               /* the input it is, or -1 */
    bool dirty, diff, first; /* first: not a repeat of an earlier output */
} out_plan;

static tn_status dirty_returned(const tn_function_ctx *ctx, const out_plan *p, int n_out) {
    for (int d = 0; d < ctx->dirty.n; d++) {
        bool found = false;
        for (int k = 0; k < n_out && !found; k++)
            found = p[k].given == ctx->dirty.v[d];
        if (!found)
            return tn__error(TN_ERR_AUTOGRAD,
                             "Some elements marked as dirty during the forward method were not "
                             "returned as output. The inputs that are modified inplace must all "
                             "be outputs of the Function.");
    }
    return TN_OK;
}

/* Decides each output's fate (PyTorch's set_history in _wrap_outputs) and
 * makes the aliases. An output gets the node as its history unless it is
 * marked non-differentiable or is not a float; it comes back as an alias
 * (same storage and version counter) when it is an input returned
 * unmodified, a repeat of an earlier output, or has an autograd or view
 * history of its own that the node must not take over. */
static tn_status plan_outputs(const tn_function_ctx *ctx, out_plan *p) {
    const fn_state *s = ctx->s;
    for (int k = 0; k < s->n_out; k++) {
        out_plan *o = &p[k];
        tn_tensor *g = o->given;
        o->input = input_index(ctx, g);
        o->first = true;
        for (int j = 0; j < k && o->first; j++)
            o->first = p[j].given != g;
        o->dirty = o->first && list_has(&ctx->dirty, g);
        o->diff = ctx->recording && !list_has(&ctx->nondiff, g) && tn__is_float(g->dtype);
        bool alias;
        if (o->dirty)
            alias = !o->diff && tn__requires_grad(g);
        else if (o->input >= 0 || !o->first)
            alias = true;
        else
            alias = o->diff ? g->ag || g->view_base : tn__requires_grad(g);
        o->result = alias ? tn__detached_alias(g) : g;
        if (!o->result) return tn_last_status();
    }
    return TN_OK;
}

static void out_meta_from(tn_node *n, int k, const tn_tensor *t) {
    tn_input_meta *m = &n->out_meta[k];
    m->ndim = t->ndim;
    m->dtype = t->dtype;
    m->device = t->storage->device;
    memcpy(m->shape, t->shape, (size_t)t->ndim * sizeof *m->shape);
}

/* Every allocation the commit needs: the outputs' autograd metas and, for a
 * view written in place, its CopySlices (rb). */
static tn_status prepare(tn_node *n, out_plan *p, int n_out, tn_rebase *rb, int *rb_out) {
    for (int k = 0; k < n_out; k++) {
        if (!p[k].diff) continue;
        if (p[k].dirty && p[k].result->view_base) {
            tn__node_retain(n); /* prepare_rebase consumes a reference */
            tn_status st = tn__inplace_prepare_rebase(p[k].result, n, rb);
            if (st < 0) return st;
            *rb_out = k;
        } else if (!tn__meta_get_or_create(p[k].result)) {
            return tn_last_status();
        }
    }
    return TN_OK;
}

/* The saved tensor t as the node saves it: an output it made (the result
 * handed out for it, saved as an output) or anything else, as an input. */
static void save_one(tn_node *n, int slot, tn_tensor *t, const out_plan *p, int n_out) {
    for (int k = 0; t && k < n_out; k++) {
        if (p[k].given != t || !p[k].diff || (p[k].input >= 0 && !p[k].dirty)) continue;
        tn__node_save(n, slot, p[k].result, true);
        return;
    }
    tn__node_save(n, slot, t, false);
}

/* Cannot fail: bumps the dirty tensors, sets the histories, saves. */
static void commit(tn_function_ctx *ctx, tn_node *n, out_plan *p, tn_rebase *rb, int rb_out) {
    const fn_state *s = ctx->s;
    for (int k = 0; k < s->n_out; k++) {
        out_plan *o = &p[k];
        if (k == rb_out) {
            tn__inplace_commit(o->result, rb, s->desc.name); /* bumps the version too */
            out_meta_from(n, k, o->result);
            continue;
        }
        if (o->dirty) tn__version_bump(o->given, s->desc.name);
        if (!n) continue;
        if (o->diff)
            tn__node_set_output(n, o->result, k);
        else
            out_meta_from(n, k, o->result); /* backward gets zeros of its shape */
    }
    for (int i = 0; n && i < ctx->saved.n; i++)
        save_one(n, i, ctx->saved.v[i], p, s->n_out);
}

/* Hands the results to the caller (its scope), the NaN check first. */
static tn_status hand_out(const tn_function_ctx *ctx, out_plan *p, tn_tensor **outputs) {
    const fn_state *s = ctx->s;
    tn_status st = TN_OK;
    for (int k = 0; k < s->n_out; k++)
        tn__anomaly_forward(s->desc.name, p[k].result, s->n_in,
                            (const tn_tensor *const *)ctx->inputs);
    for (int k = 0; k < s->n_out; k++) {
        tn_tensor *r = p[k].result;
        p[k].result = NULL;
        if (p[k].given == r) p[k].given = NULL; /* the same reference */
        if (st == TN_OK && !(outputs[k] = tn__ret(r)))
            st = tn_last_status();
        else if (st < 0)
            tn_release(r);
    }
    if (st < 0) /* a scope could not grow: the ones handed out are its to release */
        for (int k = 0; k < s->n_out; k++)
            outputs[k] = NULL;
    return st;
}

static void plan_free(out_plan *p, int n_out) {
    tn__internal_enter();
    for (int k = 0; k < n_out; k++) {
        if (p[k].result != p[k].given) tn_release(p[k].result);
        tn_release(p[k].given);
    }
    tn__internal_leave();
    tn__mfree(p);
}

/* After a successful forward: wraps outputs[] (forward's references) into
 * the results. Takes the state: the node's on success, freed otherwise. */
static tn_status wrap_outputs(tn_function_ctx *ctx, tn_tensor **outputs) {
    fn_state *s = ctx->s;
    int n_out = s->n_out;
    out_plan *p = tn__calloc((size_t)n_out, sizeof *p);
    tn_status st = p ? TN_OK : tn_last_status();
    for (int k = 0; k < n_out; k++) {
        if (p)
            p[k].given = outputs[k];
        else
            tn_release(outputs[k]);
        outputs[k] = NULL;
    }
    if (st == TN_OK) st = dirty_returned(ctx, p, n_out);
    if (st == TN_OK) st = plan_outputs(ctx, p);
    tn_node *n = NULL;
    if (st == TN_OK && ctx->recording) {
        /* made with a stand-in fn, so that a node that node_new itself
         * releases on failure does not free the state */
        n = tn__node_new(&pending_fn, s->n_in, (const tn_tensor *const *)ctx->inputs, ctx->saved.n,
                         n_out);
        if (n)
            n->fn = &s->info; /* the node owns the state now */
        else
            st = tn_last_status();
    }
    tn_rebase rb = {0};
    int rb_out = -1;
    /* commit cannot fail: an inference tensor among the saved is refused now */
    for (int i = 0; st == TN_OK && n && i < ctx->saved.n; i++)
        if (ctx->saved.v[i] && tn__is_inference(ctx->saved.v[i])) st = tn__inference_saved_error();
    if (st == TN_OK && n) st = prepare(n, p, n_out, &rb, &rb_out);
    if (st == TN_OK) {
        commit(ctx, n, p, &rb, rb_out);
        st = hand_out(ctx, p, outputs);
    } else {
        tn__inplace_abandon(&rb);
    }
    if (n)
        tn__node_release(n); /* the outputs hold it (or no one: it goes) */
    else
        state_free(s);
    if (p) plan_free(p, n_out);
    return st;
}

tn_status tn_function_apply(const tn_function *fn, int n_in, tn_tensor *const *inputs, int n_out,
                            tn_tensor **outputs) {
    tn_status st = check_apply_args(fn, n_in, inputs, n_out, outputs);
    if (st < 0) return st;
    fn_state *s = state_new(fn, n_in, inputs, n_out);
    if (!s) return tn_last_status();
    tn_function_ctx ctx = {.s = s,
                           .forward = true,
                           .inputs = inputs,
                           .recording = tn__needs_grad(n_in, (const tn_tensor *const *)inputs)};
    st = run_forward(&ctx, outputs);
    ctx.forward = false; /* the context is spent: a ctx kept by the user fails cleanly */
    if (st == TN_OK && TN_UNLIKELY(tn__numerics_on()) && !tn__in_engine())
        for (int k = 0; k < n_out; k++) /* before wrap_outputs links each to the node */
            if (outputs[k])
                tn__hooks.num_op(fn->name, outputs[k], n_in, (const tn_tensor *const *)inputs);
    if (st == TN_OK)
        st = wrap_outputs(&ctx, outputs);
    else
        state_free(s);
    tn__internal_enter();
    list_clear(&ctx.saved);
    list_clear(&ctx.dirty);
    list_clear(&ctx.nondiff);
    tn__internal_leave();
    return st;
}

tn_tensor *tn_function_apply1(const tn_function *fn, int n_in, tn_tensor *const *inputs) {
    tn_tensor *out;
    return tn_function_apply(fn, n_in, inputs, 1, &out) == TN_OK ? out : NULL;
}

/* ---- backward ------------------------------------------------------------------------------ */

static tn_status error_bw(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    (void)n, (void)go, (void)gi;
    return tn__error(TN_ERR_AUTOGRAD, ONCE_MSG);
}
/* PyTorch's DelayedError wraps with an Error node (named without its C++ namespace here). */
static const tn_fn_info error_fn = {"Error", error_bw};

/* Whether the input shape (m) broadcasts to g's: the engine then sums g back. */
static bool expandable(const tn_input_meta *m, const tn_tensor *g) {
    if (m->ndim > g->ndim) return false;
    for (int i = 1; i <= m->ndim; i++) {
        int64_t a = m->shape[m->ndim - i], b = g->shape[g->ndim - i];
        if (a != b && a != 1) return false;
    }
    return true;
}

/* PyTorch's validate_outputs for gradient i. */
static tn_status check_grad(const tn_node *n, int i, const tn_tensor *g) {
    const tn_input_meta *m = &n->in_meta[i];
    const char *name = n->fn->name;
    if (!expandable(m, g)) {
        char got[160], want[160];
        tn__format_shape(got, sizeof got, g->ndim, g->shape);
        tn__format_shape(want, sizeof want, m->ndim, m->shape);
        return tn__error(TN_ERR_SHAPE,
                         "Function %s returned an invalid gradient at index %d - got %s but "
                         "expected shape compatible with %s",
                         name, i, got, want);
    }
    if (g->ndim > 0 && !tn__same_device(tn__dev(g), m->device)) { /* a 0-dim one is moved */
        char want[32], got[32];
        return tn__error(TN_ERR_DEVICE,
                         "Function %s returned an invalid gradient at index %d - expected device "
                         "%s but got %s",
                         name, i, tn__device_str(m->device, want, sizeof want),
                         tn__device_str(tn__dev(g), got, sizeof got));
    }
    return TN_OK;
}

/* once_differentiable under create_graph: each gradient becomes an output of
 * an Error node (over an alias of it), whose backward fails. */
static tn_status delay_error(tn_node *n, tn_tensor **g) {
    tn_node *e = tn__node_new(&error_fn, n->n_in, NULL, 0, n->n_in);
    if (!e) return tn_last_status();
    tn_status st = TN_OK;
    for (int i = 0; i < n->n_in && st == TN_OK; i++) {
        if (!g[i]) continue;
        tn_tensor *a = tn__detached_alias(g[i]);
        st = a ? tn__node_set_output(e, a, i) : tn_last_status();
        tn_release(g[i]);
        g[i] = a; /* released by the caller on failure */
    }
    tn__node_release(e);
    return st;
}

static bool any_requires_grad(int n, tn_tensor *const *t) {
    for (int i = 0; i < n; i++)
        if (tn__requires_grad(t[i])) return true;
    return false;
}

/* The node's backward: the user's, then PyTorch's checks of what it returned. */
tn_status tn__function_backward(tn_node *n, tn_tensor *const *go, tn_tensor **gi) {
    fn_state *s = state_of(n);
    tn_tensor *local[8] = {0}, **g = n->n_in <= 8 ? local : tn__calloc((size_t)n->n_in, sizeof *g);
    if (!g) return tn_last_status();
    tn_function_ctx ctx = {.s = s, .node = n};
    bool once = (s->desc.flags & TN_FUNCTION_ONCE_DIFFERENTIABLE) && tn__grad_enabled();
    if (once) tn_set_grad_enabled(false);
    tn__callback_frame cf;
    tn__callback_enter(&cf);
    int r = s->desc.backward(&ctx, n->n_out, go, n->n_in, g);
    tn_status st = r < 0 ? callback_failed((tn_status)r, s->desc.name, "backward") : TN_OK;
    st = tn__callback_leave(&cf, st, n->n_in, g, "a custom function's backward");
    if (once) tn_set_grad_enabled(true);
    if (st == TN_OK && r != n->n_in)
        st = tn__error(TN_ERR_AUTOGRAD,
                       "function %s returned an incorrect number of gradients (expected %d, got "
                       "%d)",
                       s->desc.name, n->n_in, r);
    for (int i = 0; i < n->n_in && st == TN_OK; i++) {
        if (!g[i] || !tn__edge_valid(&n->edges[i])) { /* no gradient wanted: dropped */
            tn_release(g[i]);
            g[i] = NULL;
        } else {
            st = check_grad(n, i, g[i]);
        }
    }
    if (st == TN_OK && once && any_requires_grad(n->n_out, go)) st = delay_error(n, g);
    for (int i = 0; i < n->n_in; i++) {
        if (st == TN_OK)
            gi[i] = g[i];
        else
            tn_release(g[i]);
    }
    if (g != local) tn__mfree(g);
    return st;
}
