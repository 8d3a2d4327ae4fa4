# Accuracy table of the clock-fit strategies (synthetic clocks; shares tests/support/clock_synth.h).
kt_add_bench(calibration_accuracy calibration_accuracy.c)
target_include_directories(calibration_accuracy PRIVATE ${PROJECT_SOURCE_DIR}/tests)
