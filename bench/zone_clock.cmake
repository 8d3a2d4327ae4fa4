# zone_clock: a CPU zone (aggregate only, keeping its span, disabled) against bare rdtsc and clock_gettime pairs.
kt_add_bench(zone_clock zone_clock.c)
