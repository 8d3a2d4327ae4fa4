/* fuzz_cli.c — libFuzzer: the command line of `ktiming report`, `compare` and `merge`, called in-process as
 * main() would. The input is the argument list, NUL-separated; its first byte picks the command. Every file
 * the arguments can name lies in a private directory, the working directory while a command runs (libFuzzer's
 * own relative paths stay valid around it): '/' in an argument becomes '_', so nothing outside it is read or
 * written, and the directory is reset before each input to two valid snapshots (a.json, b.json, copied from the
 * committed corpus) and nothing else. Standard input is /dev/null and standard output is discarded.
 * Whatever the arguments, a command returns one of its documented exit statuses and never crashes or leaks. */
#include "cli.h"
#include "support/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);
int kt_fuzz_cli_last_status; /* the last command's exit status (read by the corpus replay test) */

#define ARGS_MAX 24   /* arguments after the command's name */
#define ARG_BYTES 256 /* longest argument kept */

static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
} kCommands[] = {{"report", ktcli_cmd_report}, {"compare", ktcli_cmd_compare}, {"merge", ktcli_cmd_merge}};

static char *g_dir;                            /* the private directory */
static int g_home = -1;                        /* the working directory libFuzzer started in */
static char *g_seed[2];                        /* contents of a.json and b.json */
static size_t g_seed_len[2];
static const char *const kSeedNames[2] = {"a.json", "b.json"};

static void fail(const char *what)
{
    perror(what);
    abort();
}

static char *slurp(const char *path, size_t *len)
{
    char *text = ktt_read_file(path, len);
    if (!text) fail(path);
    return text;
}

/* Empties the private directory, then writes the two seed snapshots. */
static void reset_dir(void)
{
    DIR *d = opendir(".");
    if (!d) fail("opendir");
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && unlink(e->d_name) && rmdir(e->d_name)) fail(e->d_name);
    closedir(d);
    for (int i = 0; i < 2; i++) {
        FILE *f = fopen(kSeedNames[i], "wb");
        if (!f || fwrite(g_seed[i], 1, g_seed_len[i], f) != g_seed_len[i] || fclose(f)) fail(kSeedNames[i]);
    }
}

static void remove_dir(void)
{
    if (chdir("/") == 0) ktt_rmtree(g_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    g_seed[0] = slurp(KT_FUZZ_CLI_SEED_DIR "/full.json", &g_seed_len[0]);
    g_seed[1] = slurp(KT_FUZZ_CLI_SEED_DIR "/version2.json", &g_seed_len[1]);
    if (!(g_dir = ktt_tmpdir("fuzz-cli"))) fail("private directory");
    if ((g_home = open(".", O_RDONLY | O_DIRECTORY)) < 0) fail("working directory");
    atexit(remove_dir);
    int null_fd = open("/dev/null", O_RDWR);
    if (null_fd < 0 || dup2(null_fd, STDIN_FILENO) < 0 || dup2(null_fd, STDOUT_FILENO) < 0) fail("/dev/null");
    close(null_fd);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kt_fuzz_cli_last_status = -1;
    if (size == 0) return 0;
    size_t cmd = data[0] % (sizeof kCommands / sizeof kCommands[0]);
    static char store[ARGS_MAX][ARG_BYTES + 1];
    char *argv[ARGS_MAX + 2];
    int argc = 0;
    argv[argc++] = (char *)kCommands[cmd].name;
    for (size_t at = 1; at < size && argc < ARGS_MAX + 1;) {
        const uint8_t *end = memchr(data + at, 0, size - at);
        size_t len = end ? (size_t)(end - (data + at)) : size - at, keep = len < ARG_BYTES ? len : ARG_BYTES;
        char *a = store[argc - 1];
        for (size_t i = 0; i < keep; i++) a[i] = data[at + i] == '/' ? '_' : (char)data[at + i];
        a[keep] = '\0';
        argv[argc++] = a;
        at += len + 1;
    }
    argv[argc] = NULL;
    if (chdir(g_dir)) fail(g_dir);
    reset_dir();
    /* a full reset of getopt's state (glibc): a command that returned in the middle of "-abc" leaves getopt
     * pointing into the previous input's arguments, which `optind = 1` alone does not clear */
    char *idle[] = {"idle", NULL};
    optind = 0;
    (void)getopt(1, idle, "");
    int rc = kt_fuzz_cli_last_status = kCommands[cmd].fn(argc, argv);
    fflush(stdout);
    if (fchdir(g_home)) fail("back to the working directory");
    if (rc != KTCLI_EXIT_OK && rc != KTCLI_EXIT_FAIL && rc != KTCLI_EXIT_USAGE && rc != KTCLI_EXIT_INPUT) {
        fprintf(stderr, "fuzz_cli: %s returned %d, not a documented exit status\n", kCommands[cmd].name, rc);
        abort();
    }
    return 0;
}
