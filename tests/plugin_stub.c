/* tests/plugin_stub.c — a stand-in for a CUDA library the plugin needs that is missing at run
 * time (the ctest plugin_missing_library): built once as a library (tenet_test_absent), and
 * once, with PLUGIN_STUB_NEEDS, as a plugin that needs it, loaded from where the library is not
 * found. */
#ifdef PLUGIN_STUB_NEEDS
int tenet_test_absent(void);
int tenet_test_needs_absent(void);
int tenet_test_needs_absent(void) { return tenet_test_absent(); }
#else
int tenet_test_absent(void);
int tenet_test_absent(void) { return 0; }
#endif
