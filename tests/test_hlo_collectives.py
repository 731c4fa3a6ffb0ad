"""`_deviceless.collectives`, the reading of a compiled program's HLO text that the
GPU compile tests (`make gpu-compile`) rely on to say what a sharded program exchanges
between devices, checked here on hand-written HLO in XLA's text syntax (no compile)."""

from _deviceless import arrays_of, collectives, is_flag

# A while loop whose body calls a fusion (a flag all-reduce inside it) and a conditional
# (one branch gathers an array), an asynchronous all-reduce of a tuple of two arrays
# after the loop, a six-element tuple all-reduce (XLA prints `/*index=5*/` inside it),
# a send and a receive in a computation a custom call names, and a collective in a
# computation that nothing inside the loop calls.
HLO = """HloModule jit_run, entry_computation_layout={(f32[2,64]{1,0})->f32[2,64]{1,0}}

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %sum = f32[] add(%a, %b)
}

%any_running (p: pred[2]) -> pred[] {
  %p = pred[2]{0} parameter(0)
  %local = pred[] reduce(%p, %f), dimensions={0}, to_apply=%or
  ROOT %all-reduce.1 = pred[] all-reduce(%local), replica_groups={{0,1,2,3}}, to_apply=%or
}

%gather (q: (f32[2,64])) -> (f32[8,64]) {
  %q = (f32[2,64]{1,0}) parameter(0)
  %e = f32[2,64]{1,0} get-tuple-element(%q), index=0
  %all-gather-start = (f32[2,64]{1,0}, f32[8,64]{1,0}) all-gather-start(%e), dimensions={0}
  %all-gather-done = f32[8,64]{1,0} all-gather-done(%all-gather-start)
  ROOT %t = (f32[8,64]{1,0}) tuple(%all-gather-done)
}

%keep (q: (f32[2,64])) -> (f32[8,64]) {
  %q = (f32[2,64]{1,0}) parameter(0)
  ROOT %t = (f32[8,64]{1,0}) custom-call(%q), custom_call_target="x"
}

%body (s: (s32[], f32[2,64])) -> (s32[], f32[2,64]) {
  %s = (s32[], f32[2,64]{1,0}) parameter(0)
  %flag = pred[] fusion(%s), kind=kLoop, calls=%any_running
  %c = (f32[8,64]{1,0}) conditional(%flag, %s, %s), branch_computations={%gather, %keep}
  ROOT %r = (s32[], f32[2,64]{1,0}) tuple(%i, %x)
}

%cond (s: (s32[], f32[2,64])) -> pred[] {
  %s = (s32[], f32[2,64]{1,0}) parameter(0)
  ROOT %lt = pred[] compare(%i, %n), direction=LT
}

%p2p (v: f32[16]) -> f32[16] {
  %v = f32[16]{0} parameter(0)
  %tok = token[] after-all()
  %send = (f32[16]{0}, u32[], token[]) send(%v, %tok), channel_id=7
  %send-done = token[] send-done(%send), channel_id=7
  %recv = (f32[16]{0}, u32[], token[]) recv(%tok), channel_id=8
  %recv-done = (f32[16]{0}, token[]) recv-done(%recv), channel_id=8
  ROOT %got = f32[16]{0} get-tuple-element(%recv-done), index=0
}

%outside (z: c64[2,16]) -> c64[2,16] {
  %z = c64[2,16]{1,0} parameter(0)
  ROOT %all-reduce.9 = c64[2,16]{1,0} all-reduce(%z), to_apply=%add
}

ENTRY %main (x: f32[2,64]) -> f32[2,64] {
  %x = f32[2,64]{1,0} parameter(0)
  %w = (s32[], f32[2,64]{1,0}) while(%init), condition=%cond, body=%body
  %all-reduce-start = (f32[100]{0}, f32[200]{0}) all-reduce-start(%a, %b), to_apply=%add
  %all-reduce-done = (f32[100]{0}, f32[200]{0}) all-reduce-done(%all-reduce-start)
  %six = (f32[9], f32[9], f32[9], f32[9], f32[9], /*index=5*/f32[9]) all-reduce(%a)
  %bounded = f32[<=8,4]{1,0} all-to-all(%x), dimensions={0}
  %wrapped = f32[16]{0} custom-call(%v), called_computations={%p2p}
  ROOT %y = f32[2,64]{1,0} call(%x), to_apply=%outside
}
"""


def test_every_collective_is_found_with_its_results_and_place():
    found = {(c["op"], c["bytes"], c["in_loop"]) for c in collectives(HLO)}
    assert found == {
        ("all-reduce", 1, True),  # the flag, in a fusion the loop's body calls
        ("all-gather", 8 * 64 * 4, True),  # its result, in a branch inside the loop
        ("all-reduce", 300 * 4, False),  # both results of the tuple, counted once
        ("all-reduce", 6 * 9 * 4, False),  # six results, past XLA's index note
        ("all-to-all", 8 * 4 * 4, False),  # a bounded dimension at its bound
        ("all-reduce", 2 * 16 * 8, False),  # complex64: 8 bytes an element
        ("send", 16 * 4, False),  # its data once, not its context or token
        ("recv", 16 * 4, False),
    }
    assert len(collectives(HLO)) == 8


def test_a_flag_is_one_boolean_and_nothing_else():
    by_op = {(c["op"], c["bytes"]): c for c in collectives(HLO)}
    assert is_flag(by_op["all-reduce", 1])
    assert not is_flag(by_op["all-gather", 2048])
    assert arrays_of("(s32[], f32[2,64]{1,0})") == [("s32", ()), ("f32", (2, 64))]
    assert arrays_of("f8e4m3fn[16]{0}") == [("f8e4m3fn", (16,))]
    several = {"op": "all-reduce", "arrays": arrays_of("pred[2]{0}"), "bytes": 2}
    assert not is_flag(several)  # a flag per sample is an array, not one flag


def test_a_program_without_loops_or_collectives_has_none():
    assert (
        collectives("ENTRY %main (x: f32[4]) -> f32[4] {\n  ROOT %x = f32[4]{0} parameter(0)\n}\n")
        == []
    )
