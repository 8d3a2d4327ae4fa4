/* cl_service.h — internal: the OpenCL backend's registration with the core's service layer. */
#ifndef KT_CL_SERVICE_H
#define KT_CL_SERVICE_H

/* Registers with the core (again after a stop) and starts the collector. */
void kt__cl_arm(void);
/* A stop ran (exit, kt_shutdown) and nothing registered again since. */
int kt__cl_stopped(void);

#endif
