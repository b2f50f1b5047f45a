/* What the HTTP side knows about a finished run: the captured streams plus
 * the jailer's RESULT. The response builder (http/result.c) turns it into
 * the reference's {stdout, stderr, error, exit_code} plus extensions. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "base/strbuf.h"
#include "ipc/proto.h"

struct run_outcome {
        struct strbuf out;       /* stdout, raw bytes */
        struct strbuf err;       /* stderr, raw bytes */
        bool truncated;          /* output cap reached; reason is REASON_OUTPUT */
        bool warm;               /* the process came from a warm pool */
        struct proto_result res; /* from the jailer */
};

void run_outcome_free(struct run_outcome *o);
