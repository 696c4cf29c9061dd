"""Megatron-style trainer: only TP rank 0 of each DP group builds a Zephon Pipeline and
broadcasts the batch tensors to its TP peers.

Coordination identity = data identity = (dp size, dp rank): exactly one Pipeline per DP
group takes part in checkpoint(). One optimizer step consumes --global-batches batches
over the job (each DP group takes global_batches / dp microbatches); gradients are
all-reduced (mean) over the DP ranks only.

    python3 examples/launch.py --nproc 4 examples/megatron_style.py -- \
        --data DIR --aggregate-dir AGG --tp 2 --steps 6 --save-at 3 --log run.json
"""
from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def main() -> None:
    args = common.parse_args(__doc__.splitlines()[0])
    rank, world, dp, tp = common.topology(args)
    common.check_config(rank, dp, args)
    dp_rank, tp_rank = divmod(rank, tp)  # mesh (dp, tp), tp innermost

    dist.init_process_group("gloo")  # env://: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    dp_group = common.dp_groups(world, tp)[tp_rank]
    tp_groups = [dist.new_group(list(range(d * tp, d * tp + tp))) for d in range(dp)]
    tp_group, tp_src = tp_groups[dp_rank], dp_rank * tp

    model, optimizer = common.build_model(args)
    start, state = 0, None
    if args.resume:
        start, state = common.load_checkpoint(args.resume, model, optimizer, args)
    pipe = None
    if tp_rank == 0:  # the loader rank of this DP group
        pipe = common.make_pipeline(args).options(
            daemon=args.socket,
            dp_degree=dp, dp_group_id=dp_rank,        # data identity
            world_size=dp, global_rank=dp_rank,       # coordination identity: loaders only
            local_peers=1,
            canonical_replicas=args.canonical_replicas,
            run_id=args.run_id, aggregate_dir=args.aggregate_dir, aggregate_timeout_s=60)
        if state is not None:
            pipe.restore(state)
        batches = iter(pipe)

    log = common.StepLog(args.log, style="megatron", world_size=world, dp=dp, tp=tp,
                         resumed_from=start if args.resume else None)
    per_group = args.global_batches // dp
    shape = (args.microbatch, args.seq_len)
    for step in range(start + 1, args.steps + 1):
        micro, mine = [], []
        for _ in range(per_group):
            if tp_rank == 0:
                batch = next(batches)
                t = batch.to_training(return_labels=True, as_torch=True,
                                      rename_fields={"input_ids": "tokens"})
                tokens, labels = t["tokens"], t["labels"]  # torch.long copies
                mine.append(common.record(batch))
            else:
                tokens = torch.empty(shape, dtype=torch.long)
                labels = torch.empty(shape, dtype=torch.long)
            dist.broadcast(tokens, tp_src, group=tp_group)
            dist.broadcast(labels, tp_src, group=tp_group)
            micro.append((tokens, labels))
        loss = common.train_step(model, optimizer, micro, dp, dp_group, args.vocab)

        everyone = common.gather_records(mine, rank)  # TP peers contribute []
        if rank == 0:
            records = [rec for r in range(0, world, tp) for rec in everyone[r]]
            log.add(step, common.global_batch_sha256(records), loss,
                    sorted((lane, index) for lane, index, _ in records))

        if step in args.save_at:
            if pipe is not None:
                zstate = pipe.checkpoint()  # collective over the dp loader ranks
                if rank == 0:
                    common.save_checkpoint(args.save.format(step=step), step, zstate, model,
                                           optimizer, args)
            dist.barrier()

    dist.barrier()
    if pipe is not None:
        pipe.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
