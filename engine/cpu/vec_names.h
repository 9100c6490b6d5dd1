/* engine/cpu/vec_names.h — vec.h's operations under the short names a kernel template uses, for
 * its element type T and suffix SUF (f32 / f64), which the includer defines first. Included once
 * per template instantiation (no guard); vec_names_end.h removes the names again.
 *   V      the vector type (tn_vec_SUF)     VL     lanes of V, an int
 *   VFMA   c + a*b per lane, FMADD's rounding
 *   SPLAT  a scalar in every lane           VLD / VOUT  unaligned load / store of a V
 */
#define V TN_NAME(tn_vec, SUF)
#define VFMA TN_NAME(TN_VFMA, SUF)
#define SPLAT TN_NAME(TN_VSPLAT, SUF)
#define VLD TN_NAME(tn_vld, SUF)
#define VOUT TN_NAME(tn_vout, SUF)
#define VL ((int)(TN_VEC_BYTES / sizeof(T)))
