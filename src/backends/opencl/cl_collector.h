/* cl_collector.h — internal: the OpenCL collector thread and the completion callback that feeds it. */
#ifndef KT_CL_COLLECTOR_H
#define KT_CL_COLLECTOR_H

#include <ktiming/cl.h>

/* Starts the collector unless it runs or KTIMING_OPENCL_COLLECTOR=0 (the ring is set up first, once). */
void kt__cl_collector_start(void);
/* Ends it (stop, exit). */
void kt__cl_collector_stop(void);
int kt__cl_collector_running(void);
/* After a push or a new polled record: wake the collector if it went to sleep. */
void kt__cl_collector_wake(void);
/* Wake it whatever it does (a detached queue's commands to finish). */
void kt__cl_collector_kick(void);
/* clSetEventCallback's callback; user is the record's handle (kt__cl_rec_handle). */
void CL_CALLBACK kt__cl_on_complete(cl_event event, cl_int status, void *user);

#endif
