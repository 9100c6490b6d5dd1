/* engine/cpu/vec_names_end.h — removes vec_names.h's names at the end of a template. */
#undef V
#undef VFMA
#undef SPLAT
#undef VLD
#undef VOUT
#undef VL
