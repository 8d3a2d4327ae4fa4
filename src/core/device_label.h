/* device_label.h — device labels and lookups over a snapshot's device records (device_label.c, compiled into the
 * core and the analysis library; hidden symbols, so the two copies never meet). */
#ifndef KT_DEVICE_LABEL_H
#define KT_DEVICE_LABEL_H

#include <ktiming.h>

/* Sets every record's name to its label: the model plus the shortest suffix that makes it unique among the
 * records of its backend (ordinal "#3", sub-device "sub #1", stable id "(0000:41:00.0)", host "@node7",
 * "rank 2"; docs/devices.md). Deterministic: the same records give the same labels in any order. */
void kt__device_labels(kt_device_info_t *dev, size_t n);
/* The record of (backend, key), or NULL. */
const kt_device_info_t *kt__device_by_key(const kt_device_info_t *dev, size_t n, kt_backend_t backend,
                                          const char *key);
/* The record whose label (name) is `device`, else whose key is; NULL if none. */
const kt_device_info_t *kt__device_lookup(const kt_device_info_t *dev, size_t n, kt_backend_t backend,
                                          const char *device);
/* 1 when the record's identity is stable across runs and machines (id_kind "uuid" or "pci"), else 0. */
int kt__device_stable(const kt_device_info_t *d);

#endif
