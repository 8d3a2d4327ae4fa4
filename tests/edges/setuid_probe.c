/* setuid_probe.c — records one kernel and exits; prints whether it ran in secure-execution mode (AT_SECURE). */
#include <ktiming.h>

#include <stdio.h>
#include <sys/auxv.h>

int main(void)
{
    kt_record("setuid_probe", KT_BACKEND_CPU, 1000);
    printf("secure=%d\n", getauxval(AT_SECURE) != 0);
    return 0;
}
