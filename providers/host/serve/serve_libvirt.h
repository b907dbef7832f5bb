/* SPDX-License-Identifier: MIT */
/*
 * The hypervisor interface on libvirt (serve_libvirt.c): virtio-mem, DIMM
 * and s390 standby behind struct hv_ops.  The connection belongs to the
 * caller; hvl_detach_done() is called from the DEVICE_REMOVED and
 * DEVICE_REMOVAL_FAILED callbacks so query stops saying busy.
 */
#pragma once

#include <libvirt/libvirt.h>

#include "providers/host/serve/serve.h"

struct hvl;

extern const struct hv_ops hvl_ops;
int hvl_new(virConnectPtr conn, struct hvl **out);
void hvl_free(struct hvl *h);
void hvl_detach_done(struct hvl *h, const char *dom, const char *alias);
