/* test_progress.c — the CLI's progress line (tools/ktiming/cli_util.c): drawn on a terminal (a pseudo-terminal
 * here) with the stage, the count and the unit, erased at the end; never written when stderr is not a terminal.
 * The delay is set to 0 so nothing depends on how long anything takes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cli.h"

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Reads what is available on fd into buf (appending at *len), waiting up to 10 s for `want` to appear. */
static void read_until(int fd, char *buf, size_t cap, size_t *len, const char *want)
{
    for (int i = 0; i < 1000 && !(want && strstr(buf, want)); i++) {
        struct pollfd pfd = {fd, POLLIN, 0};
        if (poll(&pfd, 1, 10) <= 0)
            continue;
        ssize_t n = read(fd, buf + *len, cap - 1 - *len);
        if (n > 0) {
            *len += (size_t)n;
            buf[*len] = '\0';
        }
    }
}

static void test_terminal(void **state)
{
    (void)state;
    int master = -1, slave = -1;
    if (openpty(&master, &slave, NULL, NULL, NULL) != 0)
        skip();
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    assert_int_equal(dup2(slave, STDERR_FILENO), STDERR_FILENO);
    char buf[1 << 14] = "";
    size_t len = 0;
    ktcli_progress_t p;
    ktcli_progress_begin_after(&p, "ktiming test", "first", "things", 0);
    ktcli_progress_add(&p, 5);
    read_until(master, buf, sizeof buf, &len, "first, 5 things");
    ktcli_progress_stage(&p, "second");
    read_until(master, buf, sizeof buf, &len, "ktiming test: second, ");
    ktcli_progress_end(&p);
    fflush(stderr);
    read_until(master, buf, sizeof buf, &len, NULL);
    assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
    close(saved);
    close(slave);
    close(master);
    assert_non_null(strstr(buf, "\rktiming test: first, 5 things, "));
    assert_non_null(strstr(buf, "\rktiming test: second, "));
    assert_null(strstr(buf, "\n")); /* the line is redrawn in place, never scrolled */
    size_t n = strlen(buf);
    assert_true(n >= 4);
    assert_memory_equal(buf + n - 4, "\r\x1b[K", 4); /* erased at the end */
}

static void test_not_a_terminal(void **state)
{
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    assert_int_equal(dup2(fds[1], STDERR_FILENO), STDERR_FILENO);
    ktcli_progress_t p;
    ktcli_progress_begin_after(&p, "ktiming test", "quiet", "things", 0);
    assert_int_equal(p.enabled, 0);
    ktcli_progress_add(&p, 3);
    ktcli_progress_end(&p);
    fflush(stderr);
    assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
    close(saved);
    close(fds[1]);
    char buf[64];
    assert_int_equal(read(fds[0], buf, sizeof buf), 0); /* nothing at all was written */
    close(fds[0]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_terminal),
        cmocka_unit_test(test_not_a_terminal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
