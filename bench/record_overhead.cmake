# record_overhead: cost of zones and kt_record against bare clock reads and the seed's mutex + hash map design.
kt_add_bench(record_overhead record_overhead.c)
