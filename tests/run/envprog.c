/* envprog.c — prints an environment variable as the program sees it ("(unset)" when absent): argv[1], else
 * CUDA_INJECTION64_PATH. What `ktiming run` puts in a program's environment is tested with it (no CUDA program
 * can run without a driver). */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    const char *v = getenv(argc > 1 ? argv[1] : "CUDA_INJECTION64_PATH");
    printf("%s\n", v ? v : "(unset)");
    return 0;
}
