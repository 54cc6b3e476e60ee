"""The report of ``bench/dispatch.py``: its table and the reading that follows it."""

from __future__ import annotations

import os
import time
from typing import Any


def table(results: list[dict[str, Any]], total: int, concurrency: int) -> str:
    # When and under what load the (last) run was made: saved with it (--load), else now.
    load = results[-1].get("load", os.getloadavg()[0]) if results else os.getloadavg()[0]
    date = results[-1].get("date", time.strftime("%Y-%m-%d")) if results else ""
    lines = [
        f"`bench/dispatch.py` — {total} tasks per run, {concurrency} concurrent clients, an "
        f"a2a-sdk agent that completes at once, on this machine ({os.cpu_count()} CPUs), "
        f"{date}, load average {load:.1f} at the end (the benchmark's own "
        "processes: agent, platform, clients, and in the distributed mode PostgreSQL and Redis).",
        "",
        "| Mode | Path | Tasks/s | p50 ms | p95 ms | Agent requests/task | CPU ms/task: "
        "platform | agent |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for result in results:
        path = "`POST /api/tasks:batch`" if result.get("via") == "batch" else "`POST /api/tasks`"
        for label, key in (
            (f"platform ({path})", "platform"),
            ("bare httpx send+poll", "ceiling"),
        ):
            row = result[key]
            ours = f"{row['platform_cpu_ms']:.1f}" if "platform_cpu_ms" in row else "—"
            lines.append(
                f"| {result['mode']} | {label} | {row['tps']:.0f} | {row['p50']:.0f} "
                f"| {row['p95']:.0f} | {row['requests']:.2f} | {ours} "
                f"| {row['agent_cpu_ms']:.1f} |"
            )
    lines.append("")
    for result in results:
        ratio = result["platform"]["tps"] / result["ceiling"]["tps"]
        states = ", ".join(
            f"{k.removeprefix('TASK_STATE_')} {v}" for k, v in result["platform"]["states"].items()
        )
        lines.append(
            f"- {result['mode']}: platform at **{ratio:.0%}** of the ceiling; "
            f"creations were accepted at {result['platform']['create_rps']:.0f}/s "
            f"({states})."
        )
        stages = result["platform"].get("stages") or {}
        if len(stages) > 1:
            parts = ", ".join(f"{name} {ms:.1f}" for name, ms in stages.items())
            lines.append(f"  CPU ms per task by process: {parts}.")
        services = result["platform"].get("services") or {}
        if services:
            parts = ", ".join(f"{name} {ms:.1f}" for name, ms in services.items())
            lines.append(f"  CPU ms per task of the services (not in the table): {parts}.")
        by_stage = result["platform"].get("cpu_stages") or {}
        if by_stage:
            parts = ", ".join(f"{name} {ms:.1f}" for name, ms in by_stage.items())
            lines.append(f"  CPU ms per task by stage (`a2a_cpu_seconds_total`): {parts}.")
    return "\n".join(lines)


ANALYSIS = """
**Reading the figures.** Both paths make one agent request per instant task: the agent's
answer to `message:send` (with `returnImmediately`) is already the finished task, and the
platform does not poll a task that has ended (aim: at most 2).

**Why the platform is below half of the ceiling (the aim).** Embedded, both sides are
bound by one Python process each: the bare loop by the agent's (about one core), the
platform path by the platform's (about one core too, while the agent waits for it). So
the ratio is close to the agent's CPU per task over the platform's: 1.4 / 3.0 ms in the
table's run (2026-12-05, 02:00 UTC), 0.47 at best, 0.40 measured. The VM was about twice
as fast that day as on 2026-12-03 (the platform 6.4 ms per task then, the agent 2.6 ms
in the bare loop: 0.41 at best, 0.37 measured), and the ratio stayed where it was: both
sides sped up alike. Both move between runs, the agent's most: three runs of the twelfth
round's code in a row (2026-12-03, 19:56-20:08 UTC) gave 33%, 31% and 37% embedded and
48%, 36% and 42% distributed; the runs of the sixteenth round (below) 35-51% embedded and
39-45% distributed. The bare loop costs the agent's few milliseconds and little else; the
platform adds an authenticated, validated, matched and durably stored task and a worker
that claims it, calls the agent, validates the output and records the transition with
its event. The counter `a2a_cpu_seconds_total` (by stage, thread CPU time) splits the
3.0 ms: the tasks API's request thread 1.0 (token check, Django REST framework,
validation, matching, three INSERTs), the worker 1.4 (claim, the call to the agent,
output validation, the transition), and 0.6 for daphne's event loop (HTTP parsing and
answering) and threads no stage covers. The process used 0.86 of a core: its threads
hand each other the GIL (about a hundred `futex` calls per task, counted with `strace`),
and a fifth of its CPU time is the kernel's. Distributed, the machine's two CPUs are
full (the platform's three processes, PostgreSQL and Redis, whose 1.1 ms per task the
table's column leaves out, the agent, the client): creations (348/s) outrun the one
worker process and queue, which is what its p50 shows. Since the table of 2026-12-02 the
distributed mode's cost per task fell the most (the ninth to thirteenth rounds below):
the platform's processes 7.2 -> 4.9-6.8 ms and PostgreSQL 3.2 -> 1.5-2.0 ms (on the VM's
speed of then), and its ratio rose from 33-40% to 35-58%.

Five rounds of profiling (py-spy on the live processes) cut the platform's CPU per task
from 48-58 ms to 11.9 ms embedded and 13.7 ms distributed on this machine. The first:
Celery's Django fix-up opened a new PostgreSQL session for every task (workers now keep
their connections); every transition published a stream snapshot although nobody streamed
(now only when a subscriber's marker is in Redis); matching counted each candidate's
active tasks on every creation (now once a second per process); the sweep read each
claimed task on its own. The second found that compiling SQL cost more than running it (a
35-column task read: 1.5 ms of CPU through the ORM, 0.4 ms compiled once), so the
statements every task runs went below the ORM's per-query compilation
(`platform_site/compiled.py`: the claim's reads, token authentication, the task verbs'
UPDATE, the face's push-config lookup, the gateway's withdrawal). The third: the embedded
mode starts new tasks on its own threads instead of a Celery message through the memory
broker (`a2a/local_dispatch.py`), new tasks' rows and transitions' events go in as plain
INSERTs, and daphne no longer lets Twisted parse each POST's `Content-Type` through
`email.message` (0.28 ms a request): embedded 23.0 -> 17.7 ms per task, distributed 25.3
-> 23.1 ms. The fourth: the calls to agents go over a guarded urllib3 pool
(`agent_profiles/guarded_pool.py`: 0.6 ms of CPU per call against `httpx.Client`'s 1.8
ms), a worker's claim of one task is one plain UPDATE, and the distributed mode's hints
of new tasks go through one Redis list (`a2a/hint_queue.py`) instead of a Celery message
each: embedded 17.7 -> 13.3-15.0 ms, distributed 23.1 -> 16.6 ms. The fifth, with the
stage counter: the tasks API's lean path no longer sends Django's request signals (a
thread hop each way) nor watches for the client going away (two asyncio tasks) for views
that answer at once, which halved the event loop's share (4.4 -> 2.5 ms); the sweep
leaves a new task to its hint for `A2A_HINT_GRACE` instead of racing it (it had claimed,
read and sent tasks already queued on the local threads: sweep 1.2-1.5 -> 0.2 ms), with
8 local threads instead of 4 so new tasks do not queue under load (p50 132 -> 52-57 ms);
a worker reads its task with the agent and skill in one compiled, joined statement, and
a token with its user (0.66 -> 0.46-0.50 ms for the claim's read on SQLite); the
INSERTs keep their plan per model. Embedded 15.0 -> 11.9 ms per task (61 -> 74 tasks/s),
distributed 16.6 -> 13.7 ms (56 -> 64 tasks/s). Tried and dropped: psycopg's
server-side binding (same client CPU for a read, an UPDATE and an INSERT, one more round
trip). What would close the rest is more CPUs: the distributed mode scales out (daphne
and worker processes on other cores, the database the only shared part).

The sixth round went after the long tasks' pushes and polls (see that section), and took
a few smaller costs off every task on the way: the URL patterns of the tasks API come
first (reaching `/api/tasks` at the end of the list cost 0.1 ms a call), the task verbs'
UPDATEs keep their statement and prepare datetimes for SQLite in one step (92 -> 54 us
each), and the list of task states is no longer rebuilt at every state check. On instant
tasks these are below what this machine can tell apart: four pairs of runs, old and new
code alternating, gave 11.4-13.9 ms per task for the old and 11.5-13.0 ms for the new
(mean of the pairwise differences -0.07 ms), while the order within a pair alone moved
the figure by 0.7 ms (the second run of a pair was the slower).

The seventh round profiled creation and the worker in one process without the HTTP
server (py-spy's GIL sampling, yappi, query counts), and kept what alternating runs of
the whole benchmark could see. A send whose answer ends the task no longer moves its
agent's listing cursor back (since tasks are followed by listing, every send to such an
agent wrote that UPDATE, even for a task with nothing left to list); Django's SQLite
cursor no longer rewrites every statement's `%s` placeholders with a regular expression
(`platform_site/sqlite/`: the rewrite is remembered per statement); and `POST
/api/tasks` reads the usual body directly instead of building Django REST framework's
serializer, which deep-copies its fields for every instance (anything unusual still goes
through the serializer, which words every error). Three pairs of runs, the sixth round's
code and this one's alternating: 10.6-12.0 -> 7.8-9.9 ms per task embedded, 66-82 ->
78-107 tasks/s; this round's table had 8.1 ms embedded and 11.3 ms distributed (13.7 in
the fifth round's; a later run of the same code gave 10.3 and 11.0 ms: this VM's speed
moves by a quarter from one run to the next, every stage alike). When more tasks are
created than the workers send (creations accepted at 104/s in that run), new
tasks wait past `A2A_HINT_GRACE` and the sweep starts them; it read each batch through
the ORM's `select_related`, compiled anew every time, which was a fifth of the worker's
CPU. It now reads each task with the compiled joined read a hint's claim uses: 3,000
instant tasks distributed, 6.2 -> 5.2 ms of worker CPU per task, 63 -> 81 tasks/s. Tried
and dropped, each measured: short cuts for preparing plain column values of an INSERT
(the preparation is 60 us of a task in all, unchanged), a quicker text check of agents'
answers (16 us), 4 local threads instead of 8 (the same CPU, and new tasks queue: p50
1.1 s instead of 35 ms), a thread switch interval of 1 or 20 ms instead of Python's 5
(no better), and keeping the sweep's threads (and their PostgreSQL connections) from one
sweep to the next instead of opening them anew (two pairs of 3,000-task runs: 91 and 91
tasks/s kept, 77 and 91 not; too close to call). What is left is the work itself, in
many steps of a few hundred microseconds: the largest are the call to the agent
(urllib3, and `http.client` parsing the answer's headers), the transition with its
event, the claim's read and creation's three INSERTs.

The eighth round measured what the platform's own processes do not show: the database
server. PostgreSQL spent 3.1-5.0 ms of CPU per instant task (beside 5.2-8.1 ms in the
platform's process, creation and worker measured in one process without the HTTP
server) on 14 statements, BEGINs and COMMITs included: creation's three INSERTs, the
claim, its read, the attempt's UPDATE, the transition with its event, the push-config
lookup and the gateway's withdrawal. Six of the task table's 19 indexes were the
`_like` copies (`varchar_pattern_ops`) PostgreSQL gets from Django for `db_index` on a
text column and for a foreign key to a text id; no query uses them (nothing filters
those columns with a case-sensitive `LIKE`), and each was written at every INSERT and at
every transition, which changes the indexed state. They are gone (migration 0006 renames
the indexes it keeps, so nothing is built again on a large table): four pairs of runs,
with and without them alternating in one process, 3.07-4.63 against 3.35-4.97 ms of
PostgreSQL CPU per task, the pairwise differences -0.28 ms on average (7%). The gateway's
delivery table (a row per frame owed to a socket agent, updated at each change of its
status) lost its two `_like` copies and the agent's own index, which its outbox index
(agent, status, created) covers: 9 -> 6 indexes with the primary key
(`platform_site/migration_ops.py` does both tables' migrations). Tried and dropped:
psycopg's server-side binding once more (statements prepared after five runs:
0.2-0.3 ms more PostgreSQL CPU per task in four alternating pairs), a fill factor of 70
for the task table so that more UPDATEs stay heap-only (56 -> 60% of them; -0.11 ms
on average, within the spread), and, for SQLite, a write lock in the process so that
threads queue on it instead of SQLite's sleeping busy handler (two pairs of embedded
runs, 104 and 114 against 95 and 121 tasks/s: the embedded process is bound by CPU, not
by waits for the write lock).

Then the round trips: on PostgreSQL a transition was BEGIN, its UPDATE, its event's
INSERT and COMMIT, and a new task BEGIN, three INSERTs and COMMIT. Each is now one
statement with data-modifying `WITH` clauses (`platform_site/combined.py`: the event is
inserted only if the compare-and-set changed the row; all rows or none, as before). On
transitions alone (one process, alternating): 440-567 -> 367-373 us of PostgreSQL CPU
and 403-514 -> 198-225 us of the caller's. Four pairs of distributed runs of this
benchmark, the previous commit and this one alternating (2,000 tasks each): the
platform's processes 7.1-10.1 -> 6.0-7.6 ms per task, PostgreSQL 3.5-6.8 -> 2.7-3.7 ms,
80-119 -> 109-135 tasks/s (one pair of the four showed no difference: this VM's speed
moves by a quarter from one run to the next). Last, a worker's claim (the conditional
UPDATE of the lease) and its read of the task with agent and skill became one statement
too, the read running only if the claim took the row: 750-850 -> 633-733 us of
PostgreSQL CPU and 622-769 -> 480-517 us of the worker's per claim (three alternating
pairs). The table above was measured on 2026-12-03, on the code after the eleventh
round.

The ninth round (2026-12-03) took up prepared statements again, now that a task's writes
are a few long statements (data-modifying `WITH`, the claim with its joined read) rather
than many short ones: PostgreSQL parsed and planned each of them anew for every task.
With `DATABASE_PREPARED_STATEMENTS` (on by default; psycopg's server-side binding, a
statement prepared on its connection after its fifth run) five alternating pairs of
distributed runs (1,500 tasks each) gave 3.8, 3.6, 4.6, 4.3 and 2.8 ms of PostgreSQL CPU
per task without against 2.4, 2.3, 2.5, 2.4 and 1.8 ms with (a third to nearly half
less), the platform's processes 0.3-1.0 ms less as well (psycopg no longer quotes every
value into the statement's text), and 84-128 -> 97-149 tasks/s. The eighth round's
"tried and dropped" for the same setting was measured before the statements were
combined. On 2,000 polled 60 s tasks (13 agent requests and a dozen UPDATEs each), two
alternating pairs were too noisy to call (PostgreSQL 8.2 and 12.8 ms per task with, 12.7
and 10.7 without; the load of the machine moved by half between runs). Operators behind
a pooler that cannot keep prepared statements turn it off (docs/configuration.md).
The same round counted PostgreSQL's sessions (`pg_stat_statements`, `pg_stat_database`):
a distributed run of 2,000 pushing 60 s tasks opened 281-422 of them, because the
sweep and each batch creation ran on threads of their own, closed after the call, so
every run with work opened new connections; one costs PostgreSQL about 11 ms of CPU (a
backend started, its caches filled; 200 connect-query-disconnect cycles measured) and
loses its prepared statements. Those threads are now kept with their connections
(`platform_site/dbthreads.py`, `ConnectionPool.lend`; a sweep that overlaps another
still gets threads of its own); the seventh round had tried this and found it too
close to call by tasks/s alone, without the server's CPU. The same run, the commit
before and this one in a row: 281 -> 39 sessions, PostgreSQL 5.6 -> 4.4 ms of CPU per
task, the platform's processes 13.0 -> 12.5 ms net of idle.

The tenth round (2026-12-03, later) read `pg_stat_statements` on pushed tasks again. A
push is applied under its task's row lock, in a transaction, so its transitions took the
path kept for writes inside a caller's transaction: a savepoint, the UPDATE, the event's
INSERT and the savepoint's release, four round trips and a subtransaction (4,754
SAVEPOINT and RELEASE statements in a distributed run of 2,000 pushing tasks). Nothing
catches a transition's database error to carry on in that transaction, so the savepoint
guarded nothing: a transition now joins the caller's transaction as its one combined
statement (`combined.update_then_insert(joining=True)`; new tasks keep their savepoint,
where a repeated idempotency key is caught). The four pushes of a task applied in one
process, three alternating pairs of 1,000 tasks: 5.3-6.3 -> 4.1-4.4 ms of the
platform's CPU and 2.5-3.1 -> 1.9-2.1 ms of PostgreSQL's per task; in the distributed
run, 36.6 -> 32.3 statements per task and 16 savepoints left. At 10,000 pushing tasks
the costliest statement per call was the sweep's search for overdue tasks: no index on
the deadline, ordered by creation, it read every task in flight every sweep (14.5 ms a
sweep under load; 8.2 ms in `EXPLAIN ANALYZE` on an idle machine with 10,000 in
flight, the whole table scanned). The state index now carries the deadline
(`task_state_deadline`, migration 0007, built `CONCURRENTLY` on PostgreSQL), so the
search reads only overdue tasks (0.1 ms), the most overdue first, with no more indexes
to write than before.
The same round counted PostgreSQL's sessions at 10,000 pushing tasks: 7,996 in one run.
A sweep or batch creation that overlaps another gets threads of its own, so no claimed
task waits behind another's calls, and those threads were closed after every such call;
under the load of 10,000 tasks (batch creations arriving together, sweeps outlasting
their second) that was most calls. They are now kept while overlaps go on (at most four
sets per pool, each closed after 30 s unused). The commit before and this one, one run
each in a row: 7,996 -> 483 sessions, PostgreSQL 14.5 -> 5.8 ms of CPU per task, the
platform's processes 17.2 -> 12.1 ms net of idle, and 8,596 -> 10,000 of 10,000 tasks
completed (a second run of the new code: 9,376; see Long tasks).

The eleventh round (2026-12-03, evening) profiled a distributed run of 2,000 pushing
tasks with py-spy (samples of the thread holding the GIL, the whole run) and counted its
statements again. Four cuts, each measured on its own:

- The agent's task id was written twice per pushed task. A pushing a2a-sdk agent pushes
  its task before its answer to the send reaches the platform: the push wrote the id,
  then the worker, from its copy of the task read before the push, wrote it again,
  unconditionally, then scheduled the safety-net poll in a second UPDATE. An answer
  that leaves the task in its state now goes with the schedule in one UPDATE, and when
  the push has moved the task meanwhile (the schedule's compare-and-set fails, the task
  is read again) only what the row does not hold yet is written: one UPDATE fewer per
  followed task; per 2,000 pushing tasks, 4,000 -> 2,000 UPDATEs of the id (the
  pushes').
- A batch's multi-row INSERT (100 tasks of 30 columns, 3,000 placeholders) was
  converted anew by psycopg at every batch: it keeps converted statements only up to 50
  placeholders. On PostgreSQL the rows now go as one single-row INSERT run for every row,
  pipelined (`executemany`, one round trip): 0.17-0.20 -> 0.12-0.13 ms of CPU per row
  (three alternating rounds of 2,000 rows), the server's cost the same.
- The lean ASGI paths (pushes, the face, the Bearer tasks API) and the gateway's
  sockets hopped to their database threads through asgiref's `sync_to_async`; a plain
  `run_in_executor` with a copy of the caller's context does what they need for 40-50 us
  less CPU a hop (about 120 against 160 us, 20,000 hops, four alternating rounds).
- At 10,000 tasks a send that found no answer within `A2A_HTTP_TIMEOUT` was sent again
  even when the agent, which had the message, had pushed its task meanwhile: the agent
  did the work twice, and its pushes for the first task were refused as an old
  attempt's (222 re-sends, 729 refused pushes in one run). Such a task is now followed
  instead of sent again: the next run re-sent 1 task, and 4 pushes were refused.

10,000 pushing tasks distributed completed 10,000 of 10,000 in both runs of this round's
code (the first before the last cut), and again on the twelfth round's: four of the last
five runs (see Long tasks).

The twelfth round (2026-12-03, night) measured before cutting further, and cut nothing
for speed. A py-spy profile of embedded instant tasks put 5% of the samples of the
thread holding the GIL (10% on pushed tasks) on the line of the stage counter that reads
the thread's CPU time (`time.thread_time()`, a system call). Measured directly the
counter costs 2.5 us a use, and a synthetic check (8 threads, the same call after every
60 us of work) had py-spy put 23% of its samples on that call, while two 5-s runs with
it and two without did 72,600 and 78,100 against 79,500 and 77,600 loops (a 1 us call
per 60 us loop): py-spy's GIL mode over-counts lines that enter the kernel, so its
figures for them (the counter's, a lock's) are not taken at face value. The two
statements every ending task runs after its commit, the face's push-config lookup and
the gateway's withdrawal, were timed on their own: 20-30 us of CPU each on SQLite
(under 1% of a task), and on PostgreSQL about 115 us of the platform's and 60 us of the
server's each, some 4% of an instant task. Skipping them needs a flag on the task row
(done in the thirteenth round, below). Eight hint threads per distributed worker process
instead of four: 43 and 43% of the bare client against 46 and 33% (alternating), no
difference the noise would show.

The thirteenth round (2026-12-03, late) took off every transition the statements nearly
no task needs. A task row says whether anything besides it follows the task
(`Task.watched`: a push config, a stream or blocking send with the Redis layer, a
gateway delivery; set in the creation's INSERT or under the row's lock, never cleared),
every transition's UPDATE returns it (`RETURNING`, on SQLite too), and the receivers
look only for a watched task: the face's push-config lookup and the gateway's
withdrawal, and in the distributed mode the Redis question whether a stream listens,
which a py-spy profile of the distributed worker put at 3.5% of its samples. Timed in
one process, 400 calls each, twice: the two statements 0.23-0.25 ms of the caller's CPU
each on PostgreSQL (more than the twelfth round's figure), the Redis question 0.09-0.25
ms. 400 ending
transitions a round, four rounds alternating a watched and an unwatched task: 0.80-0.89
against 1.02-1.73 ms of CPU per transition (SQLite: 0.37-0.46 against 0.47-0.54 ms).
Six distributed runs, the twelfth round's code and this round's alternating (2,000
tasks each, 23:18-23:21 UTC): 37, 31, 34% against 36, 44, 42% of the bare client; the
worker's stage 3.0, 2.7, 2.4 against 2.7, 2.3, 2.2 ms per task, while the tasks API's
stage, which the change does not touch, moved with the VM (1.7-2.2 against 2.0-2.7 ms):
the worker's CPU per task, taken as a share of the API's, fell from 1.40 to 1.08 times
(mean of three), about 0.3-0.4 ms of the platform's CPU per task and some of
PostgreSQL's. Six earlier runs, with only the two statements skipped (not yet the Redis
question), gave 38, 28, 34% against 35, 58, 41%: the noise is larger than the change.

The fourteenth round (2026-12-04) looked at the embedded process's waits rather than its
CPU. Sampled without the GIL filter (py-spy, 20 s of 6,000 tasks), 7.7% of its threads'
samples were waiting to start a transaction, and more inside write statements, in
SQLite's busy handler, which sleeps 1, 2, 5, 10... ms between tries however soon the
database is free; the process used 87% of a core. Its writers now queue on one lock per database
file, handed over the moment it is released (`platform_site/sqlite/`). Six pairs of
embedded runs, 3,000 tasks each, the old code and the new alternating (03:15-03:30 UTC):
p50 from creation to COMPLETED 38, 43, 35, 31, 32, 36 against 28, 32, 34, 29, 31, 30 ms
and p95 190, 247, 236, 153, 198, 162 against 104, 184, 201, 122, 159, 152 ms, lower in
every pair; 96-129 against 109-117 tasks/s and 6.7-8.9 against 7.4-7.9 ms of CPU per
task, the same within the noise: the lock shortens the waits, the CPU bounds the rate.

The fifteenth round (2026-12-04, evening) found Python's cyclic garbage collector in a
py-spy profile with native frames (6.6% of the embedded process's samples holding the
GIL in `gc_collect_main`) and timed it directly: callbacks around every collection in
the embedded platform, 4,000 instant tasks a run. With Python's defaults the collector
took 0.85 and 0.91 s in two runs (640-645 collections of the youngest generation, 58 of
the middle, 5 full ones over some 195,000 objects, nearly all of them what the process
loaded at start), about 0.2 ms of the 4.1-4.4 ms of platform CPU per task. Frozen once
the process is ready (`gc.freeze()`: the loaded heap leaves the collector's walks),
0.46 s; frozen and the youngest generation collected every 7,000 allocations instead of
700, 0.35 s, about 0.09 ms per task, in passes of about 6 ms; at 50,000, 0.33 s but
passes of 47 ms, a pause every request in flight would share. Server processes now
do the second (`GC_THRESHOLD`, `platform_site/gc_tuning.py`: daphne and `runplatform`
when the ASGI application is loaded, Celery workers and beat when ready). Throughput
did not show it: the same runs gave 36-42% of the bare client, with 4.0-4.4 ms per task
either way, the VM's drift between runs larger than 3% of the platform's CPU.
Distributed, two pairs alternating with the code before (3,000 tasks each, 22:23-22:25
UTC, the VM then much faster than for the table: the bare client at 584-662 tasks/s):
42 and 42% of the bare client against 38 and 40%, 3.1 and 2.9 against 3.1 and 3.3 ms
of platform CPU per task, within the noise again.

The sixteenth round (2026-12-05) measured the threads, on a day the VM ran the platform at
2.6-3.6 ms per task. Distributed, one worker process started instant tasks slower than
the API created them (250-291 against 350-410 tasks/s, p50 2.6-4.0 s): a py-spy sample of
its hint threads (`A2A_HINT_THREADS`, then 4) found them waiting on the agent's answer and
on PostgreSQL about equally, not on the CPU (the process at 0.4 of a core). With 8, runs
alternating with 4 gave 43, 43, 41, 45 and 44% against 39, 41, 40, 40 and 41% of the bare
client, 269-306 against 250-291 tasks/s and p50 1.4-2.3 against 2.6-4.0 s; 16 the same
rate (43%, 43%) with p50 0.9-1.2 s, the two CPUs full (in the twelfth round two pairs had
shown no difference beyond the noise; these runs, on a faster VM, favoured 8 each time,
with a lower p50). The default is now 8; with it the
long tasks' distributed runs gave what their rows show (10,000 polled: 0.67 cores, every
end noticed within 9.88 s; 10,000 pushing: 0.58 cores, p95 0.03 s). Embedded,
fewer of the threads that start new tasks (`A2A_EMBEDDED_THREADS`) cost less CPU per
task (one run each: 3 threads 2.7-2.8 ms, 4 2.6, 5 2.7, 6 2.9, 8 2.8-3.5, 12 3.6), but 3
or 4 let new tasks queue (p50 0.8-1.6 s, 47-51% of the bare client); three pairs of 5
against 8 gave 43, 44, 46% against 41, 43, 42% and p50 19-81 against 13-14 ms. The
default stays 8: the few percent are within this VM's noise, and each thread holds a
send for as long as its agent takes to answer, so fewer threads would cap the sends in
flight to slow agents. Tried and dropped: letting at most 3 or 4 of the 8 threads run
between their network waits (a semaphore released around the call): 43, 45 and 42%
against 35 and 42% without, noise. Grouping SQLite transactions would save little: on
this machine a transaction of two INSERTs costs 33 us alone and 10 us in a group of 50,
and an UPDATE with an INSERT 28 us, 59 us when two connections alternate (each drops its
page cache when the other wrote): 0.1-0.2 ms of the 3 ms per task. What separates single
creations from the aim is each request's own cost: created 50 to a request (`POST
/api/tasks:batch`, `--via batch`) the same tasks ran at 532 tasks/s, 75% of the bare
client, with the tasks API's stage at 0.3 ms and the event loop's at 0.1 ms per task
instead of 1.0 and 0.6 (daphne's HTTP parsing, Django's and Django REST framework's
request cycle, the token check, one transaction each).
"""
