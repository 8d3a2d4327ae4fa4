/* cl_service.h — internal: the OpenCL backend's registration with the core's service layer. */
#ifndef KT_CL_SERVICE_H
#define KT_CL_SERVICE_H

/* Registers with the core (again after a stop: kt__backend_arm) and starts the collector. */
void kt__cl_arm(void);
/* The core's stop ran (exit, kt_shutdown) and nothing armed again since (kt__backend_stopped). */
int kt__cl_stopped(void);

#endif
