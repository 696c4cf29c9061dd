// `zephonctl which`: the samples of one global step of a run, from its spec or a
// checkpoint, computed by the engine (pipeline::StepLocator) without a daemon or a run:
// for every micro-batch of the step, its DP group, lane and lane batch, and row by row
// each piece of a document in it (dataset, file, document index, token range).
//
//   zephonctl which --spec FILE --step N [--global-batches B] [--dp-degree D]
//                   [--tokens] [--text TOKENIZER] [--json] [--threads T]
//   zephonctl which --spec FILE --sample DATASET/SHARD/DOC [--passes P] [...]
//     the inverse: every pass, step, DP group, lane batch and row that holds the document
//
// FILE is a checkpoint (its spec, and its dp_degree unless --dp-degree), a
// PipelineSpec as JSON, or an attach request's JSON holding one under "spec" (what
// zephon.Pipeline sends). Thread-compatible; no shared state.
#ifndef ZEPHON_CLIENT_ZEPHONCTL_WHICH_COMMAND_H_
#define ZEPHON_CLIENT_ZEPHONCTL_WHICH_COMMAND_H_

#include <CLI/CLI.hpp>

namespace zephon::ctl {

// Registers `which` on `app`; its callback stores the process exit code in *exit_code.
void AddWhichCommand(CLI::App& app, int* exit_code);

}  // namespace zephon::ctl

#endif  // ZEPHON_CLIENT_ZEPHONCTL_WHICH_COMMAND_H_
