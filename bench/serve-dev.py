#!/usr/bin/env python3
"""The server on a shared machine (bench/RESULTS.md's development-machine figures): `warpsearch serve
--backend cpu` driven by `warpsearch load` against the in-process `warpsearch bench`, on a machine where
other people's jobs come and go. Before each run it waits for 10 s with the machine at least 92% idle,
and it logs, for every run, the cores other processes kept busy meanwhile (the machine's busy cores from
/proc/stat minus the CPU time of our processes: the command, and the server through /proc/PID/stat).
  a     closed loop: in-process bench, then the server at 1x2, 1x16, 16x8 and 128x2 (queries per
        request x clients), three times per mode;
  open  the same Poisson rates (30, 50, 70, 90% of the in-process closed loop), in-process and over HTTP
        one query per request, twice per mode;
  b     2x the server's capacity (its closed loop at 128x2), then 0.5x, 10 s each, with --max-in-flight
        4096 without shedding by time (--shed-ms 0), 4096 with it (the default), and sized to half a
        deadline of capacity (as scripts/device-serve.sh sizes it).
Every command, its table and the interference go to OUT_DIR/measure.log, every JSON report beside it.
WARPSEARCH (default target/release/warpsearch), INDEX (/root/wiki-pfor), QUERIES (the first 10,000 TREC
2005 queries) and MODES ("and or") to change.
usage: bench/serve-dev.py OUT_DIR [a] [open] [b]"""
import json, os, subprocess, sys, time

W = os.environ.get('WARPSEARCH', 'target/release/warpsearch')
I = os.environ.get('INDEX', '/root/wiki-pfor')
OUT = sys.argv[1]
Q = os.environ.get('QUERIES') or os.path.join(OUT, 'q10000.txt')
if not os.environ.get('QUERIES'):
    os.makedirs(OUT, exist_ok=True)
    with open('../shared/data/queries/trec05-efficiency.txt') as f, open(Q, 'w') as out:
        out.writelines(line for _, line in zip(range(10000), f))
PARTS = sys.argv[2:] or ['a', 'open', 'b']
os.makedirs(OUT, exist_ok=True)
results = []
LOG = open(os.path.join(OUT, 'measure.log'), 'a')


def log(*a):
    line = ' '.join(str(x) for x in a)
    print(line, flush=True)
    LOG.write(line + '\n')
    LOG.flush()


def stat():
    v = list(map(int, open('/proc/stat').readline().split()[1:8]))
    return sum(v) - v[3], sum(v)


def ticks(pid):
    s = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
    return int(s[11]) + int(s[12])


def wait_quiet():
    for _ in range(720):
        b1, t1 = stat()
        time.sleep(10)
        b2, t2 = stat()
        idle = 100 - 100 * (b2 - b1) / (t2 - t1)
        if idle >= 92:
            return
    log('never quiet')


def run(cmd, server=None):
    """Runs cmd (niced); returns (stdout, cores others kept busy, machine's busy cores, seconds)."""
    b1, t1 = stat()
    s1 = ticks(server.pid) if server else 0
    r1 = os.times()
    p = subprocess.run(['nice'] + cmd, capture_output=True, text=True)
    r2 = os.times()
    b2, t2 = stat()
    s2 = ticks(server.pid) if server else 0
    seconds = (t2 - t1) / 2 / 100
    busy = 2 * (b2 - b1) / (t2 - t1)
    ours = (r2.children_user - r1.children_user + r2.children_system - r1.children_system + (s2 - s1) / 100) / seconds
    if p.returncode != 0:
        log('FAILED', cmd, p.stderr[-2000:])
    return p.stdout, busy - ours, busy, seconds


def serve(*extra):
    p = subprocess.Popen([W, 'serve', '--index', I, '--backend', 'cpu', '--addr', '127.0.0.1:0', *extra],
                         stdout=subprocess.PIPE, stderr=open(os.path.join(OUT, 'serve.err'), 'a'), text=True)
    line = p.stdout.readline()
    assert line.startswith('listening on '), line
    os.system(f'renice -n 10 -p {p.pid} >/dev/null')
    return p, line.split()[-1]


def stop(p):
    p.terminate()
    p.wait()


def load(server, url, name, *args):
    path = os.path.join(OUT, name + '.json')
    cmd = [W, '--threads', '2', 'load', '--url', url, '--queries', Q, '--k', '10', '--server-pid',
           str(server.pid), '--json', path, *args]
    out, others, busy, secs = run(cmd, server)
    log(f'$ {" ".join(cmd)}\n{out.rstrip()}\n  [{secs:.1f} s; other processes: {others:.2f} cores; machine: {busy:.2f}]')
    r = json.load(open(path))
    results.append({'name': name, 'others': others, 'report': r})
    return r, others


def bench(name, *args):
    path = os.path.join(OUT, name + '.json')
    cmd = [W, 'bench', '--index', I, '--queries', Q, '--k', '10', '--backend', 'cpu', '--json', path, *args]
    out, others, busy, secs = run(cmd)
    log(f'$ {" ".join(cmd)}\n{out.rstrip()}\n  [{secs:.1f} s; other processes: {others:.2f} cores; machine: {busy:.2f}]')
    r = json.load(open(path))
    results.append({'name': name, 'others': others, 'report': r})
    return r, others


log(f'== {time.strftime("%F %T %Z")}; parts {PARTS}')
caps = {}
if 'a' in PARTS:
    for mode in os.environ.get('MODES', 'and or').split():
        server, url = serve()
        wait_quiet()
        load(server, url, f'warm-{mode}', '--mode', mode, '--batch', '16', '--clients', '8', '--closed-queries', '0')
        for rep in range(3):
            wait_quiet()
            bench(f'a-{mode}-inprocess-{rep}', '--mode', mode)
            for b, c in [(1, 2), (1, 16), (16, 8), (128, 2)]:
                load(server, url, f'a-{mode}-b{b}c{c}-{rep}', '--mode', mode, '--batch', str(b), '--clients', str(c),
                     '--warmup', '0')
        stop(server)

if 'open' in PARTS:
    for mode in os.environ.get('MODES', 'and or').split():
        wait_quiet()
        r, _ = bench(f'open-{mode}-cap', '--mode', mode)
        cap = r['closed_loop']['qps']
        rates = ','.join(str(round(cap * f)) for f in (0.3, 0.5, 0.7, 0.9))
        for rep in range(2):
            wait_quiet()
            bench(f'open-{mode}-inprocess-{rep}', '--mode', mode, '--rates', rates, '--duration', '5')
            server, url = serve()
            load(server, url, f'open-{mode}-serve-{rep}', '--mode', mode, '--batch', '1', '--closed-queries', '0',
                 '--rates', rates, '--duration', '5')
            stop(server)

if 'b' in PARTS:
    for mode in os.environ.get('MODES', 'and or').split():
        # The server's capacity: its best closed loop (128 queries per request, 2 clients) when quiet.
        server, url = serve()
        wait_quiet()
        r, _ = load(server, url, f'b-{mode}-cap', '--mode', mode, '--batch', '128', '--clients', '2')
        stop(server)
        cap = round(r['closed_loop']['qps'])
        batch = min(128, max(1, round(cap * 0.05 / 8)))
        sized = max(8 * batch, round(cap * 0.05))
        connections = max(512, 2 * 4096 // batch + 1)
        for label, extra in [('4096-noshed', ['--shed-ms', '0']), ('4096', []),
                             (str(sized), ['--max-in-flight', str(sized)])]:
            server, url = serve(*extra)
            wait_quiet()
            load(server, url, f'b-{mode}-overload-{label}', '--mode', mode, '--batch', str(batch), '--clients', '16',
                 '--closed-queries', '0', '--connections', str(connections), '--rates', f'{2 * cap},{cap // 2}',
                 '--duration', '10')
            stop(server)

json.dump(results, open(os.path.join(OUT, f'results-{"-".join(PARTS)}.json'), 'w'))
log('done', time.strftime('%F %T'))
