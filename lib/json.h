/* SPDX-License-Identifier: MIT */
/*
 * The one cleanup attribute for jansson values: a json_t * declared
 * _cleanup_json_ is released (json_decref) on every path out of its scope.
 * jansson brings json_decrefp itself; this only names it the way memgrant
 * names its other cleanup attributes (lib/util.h).
 */
#pragma once

#include <jansson.h>

#define _cleanup_json_ __attribute__((cleanup(json_decrefp)))
