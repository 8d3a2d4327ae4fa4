/* main.c — the ktiming command-line tool: dispatches to its subcommands. */
#include "cli.h"

#include <stdio.h>
#include <string.h>

/* One subcommand. */
typedef struct ktcli_cmd_t {
    const char *name;                 /* as typed */
    int (*fn)(int argc, char **argv); /* entry point */
    const char *summary;              /* one line for --help */
    int write_failed;                 /* its exit status when its standard output could not be written */
} ktcli_cmd_t;

static const ktcli_cmd_t kCommands[] = {
    {"demo", ktcli_cmd_demo, "run the built-in kernels on every backend found and print the table", KTCLI_EXIT_FAIL},
    {"report", ktcli_cmd_report, "print or convert a snapshot (text, markdown, csv, json, chrome, html, lines)",
     KTCLI_EXIT_FAIL},
    {"devices", ktcli_cmd_devices, "list backends and devices with their clock models", KTCLI_EXIT_FAIL},
    {"compare", ktcli_cmd_compare, "compare two snapshots kernel by kernel (before/after verdicts)",
     KTCLI_EXIT_INPUT},
    {"run", ktcli_cmd_run, "time every kernel of an unmodified program", KTCLI_EXIT_RUN_OWN},
    {"merge", ktcli_cmd_merge, "merge snapshots of several processes or ranks (load balance: --by-rank)",
     KTCLI_EXIT_FAIL},
    {"history", ktcli_cmd_history, "kernel performance history in a database; regressions across commits",
     KTCLI_EXIT_INPUT},
};
static const size_t kCommandCount = sizeof(kCommands) / sizeof(kCommands[0]);

static void usage(FILE *out)
{
    fprintf(out, "usage: ktiming <command> [options]\n       ktiming --help | --version\n\ncommands:\n");
    for (size_t i = 0; i < kCommandCount; i++)
        fprintf(out, "  %-9s %s\n", kCommands[i].name, kCommands[i].summary);
    fprintf(out, "\n'ktiming help <command>' or 'ktiming <command> --help' describes a command;\n"
                 "man ktiming has them all, with the exit statuses.\n");
}

static const ktcli_cmd_t *find_command(const char *name)
{
    for (size_t i = 0; i < kCommandCount; i++)
        if (!strcmp(name, kCommands[i].name))
            return &kCommands[i];
    return NULL;
}

/* A command's status, or its write-failure status when it says done but what it printed was not written (--help,
 * --version or a listing on /dev/full or a closed descriptor): done means written. */
static int checked(const ktcli_cmd_t *cmd, int status)
{
    char who[32];
    snprintf(who, sizeof who, "ktiming %s", cmd->name);
    return status == 0 && ktcli_stdout_failed(who) ? cmd->write_failed : status;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "ktiming: no command given\n\n");
        usage(stderr);
        return KTCLI_EXIT_USAGE;
    }
    /* `ktiming help CMD` is `ktiming CMD --help`; `help help`, `help --help` and `help -h` are the overview */
    if (!strcmp(argv[1], "help") && argc > 2 && strcmp(argv[2], "help") && strcmp(argv[2], "--help") &&
        strcmp(argv[2], "-h")) {
        const ktcli_cmd_t *cmd = find_command(argv[2]);
        if (!cmd) {
            fprintf(stderr, "ktiming help: unknown command '%s'\n\n", argv[2]);
            usage(stderr);
            return KTCLI_EXIT_USAGE;
        }
        char *args[] = {argv[2], "--help", NULL};
        return checked(cmd, cmd->fn(2, args));
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return ktcli_stdout_failed("ktiming") ? KTCLI_EXIT_FAIL : 0;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
        printf("ktiming %s\n", kt_version());
        return ktcli_stdout_failed("ktiming") ? KTCLI_EXIT_FAIL : 0;
    }
    const ktcli_cmd_t *cmd = find_command(argv[1]);
    if (cmd)
        return checked(cmd, cmd->fn(argc - 1, argv + 1));
    if (argv[1][0] == '-')
        fprintf(stderr, "ktiming: unknown option '%s' (options go after the command: ktiming <command> --help)\n\n",
                argv[1]);
    else
        fprintf(stderr, "ktiming: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return KTCLI_EXIT_USAGE;
}
