/* SPDX-License-Identifier: MIT */
/*
 * CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of
 * iSCSI, ext4 metadata and btrfs; check value crc32c("123456789") = 0xE3069283.
 * Table driven (one constant table); no state, thread-safe.
 *
 * crc32c(0, data, len) checksums a buffer; passing the previous result as
 * CRC continues it over a following buffer.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

uint32_t crc32c(uint32_t crc, const void *data, size_t len);
