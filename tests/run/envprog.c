/* envprog.c — prints CUDA_INJECTION64_PATH as the program sees it ("(unset)" when absent): the program
 * `ktiming run --cuda` is tested with, since no CUDA program can run without a driver. */
#include <stdio.h>
#include <stdlib.h>

int main(void)
{
    const char *v = getenv("CUDA_INJECTION64_PATH");
    printf("%s\n", v ? v : "(unset)");
    return 0;
}
