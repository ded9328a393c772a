#!/usr/bin/env python3
"""How far nvlinkrs' sm_100+ images are from nvlink's, with and without the finalizer.

    finalizer_diffs.py NVLINKRS WORKDIR [--generated N] [--arch sm_100,sm_120]

Links the merge fixtures (each alone, and a few multi-unit sets) and N generated
programs (tests/differential/genprog.py, compiled with nvcc -rdc) with nvlink and with
nvlinkrs (NVLINKRS_FINALIZER=off and =nvjitlink), and prints per link the number of
differences `nvlinkrs compare` lists against nvlink's image, then the totals.
CUDA_HOME names the toolkit; NVLINKRS_FIXTURES the built fixtures (target/fixtures).
"""
import os, re, subprocess, sys

ALONE = ['a', 'b', 'heavy', 'caller', 'coop', 'dp', 'cdp', 'cdp2', 'managed', 'virt',
         'dyn1', 'dyn2', 'dyn3', 'dyn4', 'smem', 'smem2', 'smem3', 'smem4']
SETS = [['a', 'b'], ['a', 'b', 'heavy', 'caller'], ['heavy', 'caller'], ['dyn2', 'dyn3'],
        ['smem', 'smem2'], ['managed', 'virt'], ['virt', 'coop', 'managed']]


def diffs(rs, want, got):
    p = subprocess.run([rs, 'compare', '--limit', '100000', want, got], capture_output=True, text=True)
    last = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else p.stderr.strip()
    if p.returncode == 0:
        return 0
    m = re.search(r'(\d+) differences?', last)
    return int(m.group(1)) if m else f'?({last})'


def link(tool, args, out, env=None):
    e = dict(os.environ, NVLINKRS_CACHE='0')
    e.update(env or {})
    p = subprocess.run([tool, *args, '-o', out], capture_output=True, text=True, env=e)
    return p.returncode == 0, (p.stdout + p.stderr).strip()


def main():
    rs, work = os.path.abspath(sys.argv[1]), sys.argv[2]
    opts = dict(zip(sys.argv[3::2], sys.argv[4::2]))
    cuda, fx = os.environ['CUDA_HOME'], os.path.join(os.environ['NVLINKRS_FIXTURES'], 'merge')
    nvlink = os.path.join(cuda, 'bin', 'nvlink')
    lib = ['-L' + os.path.join(cuda, 'lib'), '-lcudadevrt']
    os.makedirs(work, exist_ok=True)
    links = []
    for arch in opts.get('--arch', 'sm_100,sm_120').split(','):
        sm = arch[3:]
        for names in [[n] for n in ALONE] + SETS:
            files = [os.path.join(fx, f'{n}_{sm}.cubin') for n in names]
            if all(os.path.exists(f) for f in files):
                links.append((f"{'+'.join(names)} {arch}", [f'-arch={arch}', *files, *lib]))
        for seed in range(1, int(opts.get('--generated', '0')) + 1):
            d = os.path.join(work, f'gen{seed}_{sm}')
            if not os.path.isdir(d):
                subprocess.run([sys.executable, 'tests/differential/genprog.py', str(seed), d], check=True)
                cus = sorted(f for f in os.listdir(d) if f.endswith('.cu'))
                for cu in cus:
                    subprocess.run([os.path.join(cuda, 'bin', 'nvcc'), '-cubin', '-rdc=true', f'-arch={arch}',
                                    os.path.join(d, cu), '-o', os.path.join(d, cu[:-3] + '.cubin')], check=True)
            cubins = sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith('.cubin'))
            links.append((f'generated {seed} {arch}', [f'-arch={arch}', *cubins, *lib]))
    total = {'off': 0, 'nvjitlink': 0}
    for name, args in links:
        want = os.path.join(work, 'want.cubin')
        ok, msg = link(nvlink, args, want)
        if not ok:
            print(f'{name}: nvlink fails ({msg.splitlines()[0] if msg else ""})')
            continue
        row = []
        for mode in total:
            got = os.path.join(work, f'got_{mode}.cubin')
            ok, msg = link(rs, args, got, {'NVLINKRS_FINALIZER': mode})
            n = diffs(rs, want, got) if ok else f'fails ({msg.splitlines()[0] if msg else ""})'
            if isinstance(n, int):
                total[mode] += n
            row.append(f'{mode} {n}')
        print(f'{name}: ' + ', '.join(row), flush=True)
    print('total: ' + ', '.join(f'{m} {n}' for m, n in total.items()))


if __name__ == '__main__':
    main()
