#!/usr/bin/env python3
"""Probes of nvlink's sm_100+ finalizer (docs/rules/finalizer.md).

  finalizer_probe.py regenerated ARCH CUBIN... [-- NVLINK-ARGS...]
      Marks every function's SASS in copies of the cubins (the stall count of a padding
      NOP or of the closing branch-to-self flipped), links the copies with nvlink and
      prints, per function, whether the image kept the mark (nvlink copied ptxas's SASS)
      or not (nvlink regenerated the code). At sm_90 every mark is kept.
  finalizer_probe.py jitlink ARCH OUT CUBIN...
      Links the cubins with the toolkit's libnvJitLink (-arch=ARCH), as the prototype does
      per unit; prints why when libnvJitLink refuses (a unit that does not link alone).

CUDA_HOME names the toolkit (scripts/setup.sh prints it).
"""
import ctypes, os, struct, subprocess, sys, tempfile


def sections(data):
    shoff, = struct.unpack_from('<Q', data, 0x28)
    size, num, strndx = struct.unpack_from('<HHH', data, 0x3a)
    hdrs = [struct.unpack_from('<IIQQQQIIQQ', data, shoff + i * size) for i in range(num)]
    names = hdrs[strndx][4]
    for h in hdrs:
        name = data[names + h[0]:data.index(b'\0', names + h[0])].decode()
        yield name, h[4], h[5]


def mark(data):
    """The cubin with one instruction of each function marked; {function: (offset, word)}."""
    data, marks = bytearray(data), {}
    for name, off, size in sections(bytes(data)):
        if not name.startswith('.text.'):
            continue
        for at in range(size - 16, -1, -16):
            lo, hi = struct.unpack_from('<QQ', data, off + at)
            if lo & 0xfff in (0x918, 0x947):  # NOP, BRA
                word = hi ^ (3 << 41)
                struct.pack_into('<Q', data, off + at + 8, word)
                marks[name] = (at, word)
                break
    return bytes(data), marks


def regenerated(arch, cubins, extra):
    cuda = os.environ['CUDA_HOME']
    with tempfile.TemporaryDirectory() as d:
        marks, inputs = {}, []
        for i, c in enumerate(cubins):
            data, m = mark(open(c, 'rb').read())
            marks.update(m)
            inputs.append(os.path.join(d, f'{i}.cubin'))
            open(inputs[-1], 'wb').write(data)
        out = os.path.join(d, 'out.cubin')
        subprocess.run([f'{cuda}/bin/nvlink', f'-arch={arch}', *inputs, *extra, '-o', out], check=True)
        image = open(out, 'rb').read()
        found = {n: (o, s) for n, o, s in sections(image)}
        for name, (at, word) in sorted(marks.items()):
            if name not in found:
                print(f'{name}: not in the image')
                continue
            hi, = struct.unpack_from('<Q', image, found[name][0] + at + 8)
            print(f"{name}: {'kept' if hi == word else 'regenerated'}")


def jitlink(arch, out, cubins):
    lib = ctypes.CDLL(os.path.join(os.environ['CUDA_HOME'], 'lib', 'libnvJitLink.so.13'))
    fn = lambda n: getattr(lib, f'__{n}_13_0')
    h, opt = ctypes.c_void_p(), f'-arch={arch}'.encode()
    assert fn('nvJitLinkCreate')(ctypes.byref(h), 1, (ctypes.c_char_p * 1)(opt)) == 0
    names = [c.encode() for c in cubins]  # (libnvJitLink keeps the pointers for its log)
    for c in names:
        assert fn('nvJitLinkAddFile')(h, 1, c) == 0, c
    if fn('nvJitLinkComplete')(h) != 0:
        size = ctypes.c_size_t()
        fn('nvJitLinkGetErrorLogSize')(h, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value + 1)
        fn('nvJitLinkGetErrorLog')(h, log)
        sys.exit('libnvJitLink refused: ' + log.value.decode(errors='replace').strip())
    size = ctypes.c_size_t()
    fn('nvJitLinkGetLinkedCubinSize')(h, ctypes.byref(size))
    image = ctypes.create_string_buffer(size.value)
    fn('nvJitLinkGetLinkedCubin')(h, image)
    open(out, 'wb').write(image.raw)


if __name__ == '__main__':
    if len(sys.argv) > 3 and sys.argv[1] == 'regenerated':
        rest = sys.argv[3:]
        cut = rest.index('--') if '--' in rest else len(rest)
        regenerated(sys.argv[2], rest[:cut], rest[cut + 1:])
    elif len(sys.argv) > 4 and sys.argv[1] == 'jitlink':
        jitlink(sys.argv[2], sys.argv[3], sys.argv[4:])
    else:
        sys.exit(__doc__)
