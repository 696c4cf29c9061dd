"""TorchTitan-style trainer: every rank builds its own Zephon Pipeline.

Data identity = the data-parallel part of the mesh (dp_replicate x dp_shard flattened
into one DP dimension); TP peers of a DP group get identical batches by asking the node's
zephond for the same data identity. Coordination identity = the whole job (WORLD_SIZE,
RANK): every rank calls checkpoint(), here through the torch dataset's state_dict() (the
Stateful protocol TorchTitan's checkpointer saves with the model). One optimizer step
consumes --global-batches
batches over the job (gradient accumulation: each DP group takes global_batches / dp
microbatches); gradients are all-reduced (mean) over the DP ranks only.

    python3 examples/launch.py --nproc 4 examples/torchtitan_style.py -- \
        --data DIR --aggregate-dir AGG --tp 2 --steps 6 --save-at 3 --log run.json
"""
from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402


def main() -> None:
    args = common.parse_args(__doc__.splitlines()[0])
    rank, world, dp, tp = common.topology(args)
    common.check_config(rank, dp, args)

    # The mesh, outermost first: (dp_replicate, dp_shard, tp). Zephon sees only the
    # flattened DP coordinate: dp_degree = dp_replicate * dp_shard and
    # dp_group_id = replicate_index * dp_shard + shard_index.
    dp_shard = args.dp_shard or dp
    if dp % dp_shard:
        common.fail(rank, f"--dp-shard={dp_shard} does not divide dp={dp}")
    dp_replicate = dp // dp_shard
    replicate_index, rest = divmod(rank, dp_shard * tp)
    shard_index, tp_rank = divmod(rest, tp)
    dp_rank = replicate_index * dp_shard + shard_index
    assert dp_rank == rank // tp and dp_replicate * dp_shard == dp

    dist.init_process_group("gloo")  # env://: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT
    groups = common.dp_groups(world, tp)
    dp_group = groups[tp_rank]

    model, optimizer = common.build_model(args)
    pipe = common.make_pipeline(args).options(
        daemon=args.socket,
        dp_degree=dp, dp_group_id=dp_rank,            # data identity: the DP mesh
        world_size=world, global_rank=rank,           # coordination identity: the job
        local_peers=tp,                               # this DP group's ranks on this node
        canonical_replicas=args.canonical_replicas,
        run_id=args.run_id, aggregate_dir=args.aggregate_dir, aggregate_timeout_s=60)
    # What TorchTitan's dataloader is: a torch dataset whose state_dict() the checkpointer
    # saves with the model. Each item: the training tensors (int64 copies: valid after
    # the batch is released) and the batch's record for the step log.
    dataset = pipe.to_torch_dataset(transform=lambda batch: (
        batch.to_training(return_labels=True, as_torch=True),
        common.record(batch)))
    start = 0
    if args.resume:
        start, state = common.load_checkpoint(args.resume, model, optimizer, args)
        dataset.load_state_dict(state)  # any dp that divides canonical_replicas

    log = common.StepLog(args.log, style="torchtitan", world_size=world, dp=dp, tp=tp,
                         resumed_from=start if args.resume else None)
    per_group = args.global_batches // dp
    batches = iter(DataLoader(dataset, batch_size=None, num_workers=0))
    for step in range(start + 1, args.steps + 1):
        micro, mine = [], []
        for _ in range(per_group):
            t, record = next(batches)
            micro.append((t["input_ids"], t["labels"]))
            mine.append(record)
        loss = common.train_step(model, optimizer, micro, dp, dp_group, args.vocab)

        everyone = common.gather_records(mine, rank)
        if rank == 0:
            for r in range(world):  # TP peers must have seen their group's batches
                if everyone[r] != everyone[(r // tp) * tp]:
                    raise SystemExit(f"rank {r} got other batches than its TP peer "
                                     f"{(r // tp) * tp} at step {step}")
            records = [rec for r in range(0, world, tp) for rec in everyone[r]]
            log.add(step, common.global_batch_sha256(records), loss,
                    sorted((lane, index) for lane, index, _ in records))

        if step in args.save_at:
            state = dataset.state_dict()  # the collective checkpoint: every rank, same step
            if rank == 0:
                common.save_checkpoint(args.save.format(step=step), step, state, model,
                                       optimizer, args, key="dataloader")
            dist.barrier()

    dist.barrier()
    pipe.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
