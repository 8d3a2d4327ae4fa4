/* app.c — an outside program using an installed ktiming: one CPU kernel, then the text table on stdout. Built
 * with timing on it prints the table; compiled out (no KTIMING_ENABLE, or 0) it prints nothing. */
#include <ktiming.h>

static volatile double g_sink; /* keeps the work from being optimised away */

static void work(int n)
{
    double acc = 0;
    for (int i = 0; i < n; i++)
        acc += i * 0.5;
    g_sink = acc;
}

int main(void)
{
    for (int i = 0; i < 5; i++) {
        KT_CPU_BEGIN(z, "consumer_kernel");
        work(1000);
        KT_CPU_END(z);
    }
    kt_snapshot_t *s = kt_snapshot();
    kt_report_print(stdout, s, KT_FORMAT_TEXT, NULL);
    kt_snapshot_free(s);
    return 0;
}
