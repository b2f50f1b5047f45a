/* lockbox's version: printed by --version (lockboxd, lockbox), sent as the
 * client's User-Agent and in the metrics' lockbox_build_info. */
#pragma once

#define LOCKBOX_VERSION "0.1.0"
