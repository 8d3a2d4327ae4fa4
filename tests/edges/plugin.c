/* plugin.c — a loadable library recording one kernel under its own literal name (KT_PLUGIN_NAME). Built twice
 * with names of equal length, so both copies have one layout and the literal sits at the same offset. */
#include <ktiming.h>

__attribute__((visibility("default"))) const char *plugin_name(void) { return KT_PLUGIN_NAME; }

__attribute__((visibility("default"))) void plugin_record(unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        kt_record(KT_PLUGIN_NAME, KT_BACKEND_CPU, 100 + i);
}
