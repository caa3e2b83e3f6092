"""Small builders shared by the ordering tests."""

from sarathi_ext.core import RequestView


def view(rid, arrival, prompt, score=None, true_len=None, done=0, generated=0, seq=None):
    """A RequestView with its arrival sequence set (the planner normally assigns it)."""
    r = RequestView(rid, arrival, prompt, score=score, true_output_len=true_len, prefill_done=done)
    r.num_generated = generated
    r._seq = rid if seq is None else seq
    return r


def drain(heap):
    """Pop every member, returning the ids in pop order."""
    out = []
    while (r := heap.pop()) is not None:
        out.append(r.req_id)
    return out
