/* load.c — an outside program using the installed analysis library: loads a snapshot, prints its table. */
#include <ktiming/analysis.h>

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    kt_snapshot_t *s;
    char err[256];
    if (kt_snapshot_load(argv[1], NULL, &s, err, sizeof err) != 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    printf("entries=%zu\n", s->count);
    kt_report_print(stdout, s, KT_FORMAT_TEXT, NULL);
    kt_snapshot_free(s);
    return 0;
}
