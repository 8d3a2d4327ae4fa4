# Accuracy table of the clock-fit strategies (synthetic clocks; shares tests/calibrate/synth.h).
kt_add_bench(calibration_accuracy calibration_accuracy.c)
target_include_directories(calibration_accuracy PRIVATE ${PROJECT_SOURCE_DIR}/tests)
