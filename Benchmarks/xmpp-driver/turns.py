#!/usr/bin/env python3
"""Runs ping harnesses side by side, taking turns, so that their samples come from the same
minutes of a noisy host (Benchmarks/xmpp-driver/run.sh's ping rows).

    turns.py BATCH OUT_DIR -- COMMAND... [-- COMMAND...]...

Each command is started at once with BENCH_TURNS=IN,OUT,BATCH (two pipe descriptors, see
XMPPDriverBenchmarks.Turns and strophe_bench.c) and, when TURNAROUND_SO is set, with that library
preloaded and TURNAROUND_OUT=OUT_DIR/turnaround.N.json. Once every harness has said it is
connected, the turn goes round them in order: a harness pings BATCH times and passes it back;
one that has exited is done. Prints each harness's JSON line, in the commands' order, with its
turnaround line merged in (whose own-part samples include one wait for the turn per batch: 2 %
of them with batches of 50, below its p90). A harness that fails, or holds a turn for more than
TURN_LIMIT seconds (default 120), ends the run: every harness is killed, the exit status is 1.
"""
import json
import os
import select
import subprocess
import sys
import time


def main():
    arguments = sys.argv[1:]
    if len(arguments) < 4 or arguments[2] != "--":
        sys.exit(__doc__)
    batch, out_dir = int(arguments[0]), arguments[1]
    commands, current = [], None
    for argument in arguments[2:]:
        if argument == "--":
            current = []
            commands.append(current)
        else:
            current.append(argument)
    limit = float(os.environ.get("TURN_LIMIT", "120"))
    preload = os.environ.get("TURNAROUND_SO")
    children = []
    try:
        for index, command in enumerate(commands):
            go_read, go_write = os.pipe()
            done_read, done_write = os.pipe()
            environment = dict(os.environ, BENCH_TURNS=f"{go_read},{done_write},{batch}")
            if preload:
                environment["LD_PRELOAD"] = preload
                environment["TURNAROUND_OUT"] = os.path.join(out_dir, f"turnaround.{index}.json")
            output = open(os.path.join(out_dir, f"output.{index}.txt"), "w+")
            process = subprocess.Popen(
                command, env=environment, pass_fds=(go_read, done_write), stdout=output
            )
            os.close(go_read)
            os.close(done_write)
            children.append({"process": process, "go": go_write, "done": done_read, "output": output,
                             "finished": False})

        def wait_for(child, what):
            """A byte from `child` (True), or its end (False)."""
            deadline = time.monotonic() + limit
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RuntimeError(f"{what} took more than {limit:.0f} s: {commands[children.index(child)]}")
                ready, _, _ = select.select([child["done"]], [], [], left)
                if ready:
                    return os.read(child["done"], 1) != b""

        for child in children:
            if not wait_for(child, "connecting"):
                raise RuntimeError(f"exited before connecting: {commands[children.index(child)]}")
        while not all(child["finished"] for child in children):
            for child in children:
                if child["finished"]:
                    continue
                os.write(child["go"], b"g")
                if not wait_for(child, "a turn"):
                    child["finished"] = True
        lines = []
        for index, child in enumerate(children):
            if child["process"].wait(timeout=limit) != 0:
                raise RuntimeError(f"failed: {commands[index]}")
            child["output"].seek(0)
            line = json.loads(child["output"].read().strip().splitlines()[-1])
            if preload:
                with open(os.path.join(out_dir, f"turnaround.{index}.json")) as turnaround:
                    line.update(json.loads(turnaround.read().strip().splitlines()[-1]))
            lines.append(line)
        for line in lines:
            print(json.dumps(line, separators=(",", ":")))
    except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as error:
        print(f"turns.py: {error}", file=sys.stderr)
        for child in children:
            if child["process"].poll() is None:
                child["process"].kill()
                child["process"].wait()
        sys.exit(1)


if __name__ == "__main__":
    main()
