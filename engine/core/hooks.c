/* The plug-in table and the debug switches it is read behind (hooks.h). */
#include "hooks.h"

_Atomic unsigned tn__anomaly_flags;
_Thread_local unsigned tn__anomaly_local;
_Atomic unsigned tn__race_flag;
_Atomic unsigned tn__monitor_flag;
_Atomic unsigned tn__profile_flag;
_Atomic unsigned tn__numerics_flag;
_Atomic unsigned tn__nf_batched;
_Atomic unsigned tn__mon_pending;

tn_hooks tn__hooks;
