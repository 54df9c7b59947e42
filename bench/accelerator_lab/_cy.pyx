# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The lab's variant (b): the per-event work in Cython: ``Acct`` a cdef class with C fields, the sync observer and the
body reader cdef classes with ``__next__`` (tp_iternext), the async observer an ``async def`` generator (Cython's own
async generator type) over the same cdef ``Acct``."""

from libc.string cimport memchr
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE

from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

DEF N_BOUNDS = 17
DEF N_BUCKETS = 18

cdef long long BOUNDS[N_BOUNDS]
BOUNDS[:] = [1000000, 2500000, 5000000, 10000000, 20000000, 40000000, 80000000, 160000000, 320000000, 640000000,
             1280000000, 2560000000, 5120000000, 10240000000, 20480000000, 40960000000, 81920000000]


cdef class Acct:
    cdef public object clock
    cdef public object pulling
    cdef public long long events, deltas, t_pull, wait_ns, t_first_delta, t_prev_delta, keepalives
    cdef public bint line_start
    cdef long long _counts[N_BUCKETS]
    cdef long long _sums[N_BUCKETS]

    def __init__(self, clock=None):
        self.clock = clock
        self.line_start = True

    cdef inline long long now(self) except? -1:
        cdef timespec ts
        if self.clock is None:
            clock_gettime(CLOCK_MONOTONIC, &ts)
            return ts.tv_sec * 1000000000LL + ts.tv_nsec
        return self.clock()

    cdef inline void account(self, object item, long long now):
        cdef long long tp = self.t_pull, prev, gap
        cdef int i
        if tp:
            self.t_pull = 0
            self.wait_ns += now - tp
        self.events += 1
        if type(item) is str and len(<str>item):
            self.deltas += 1
            prev = self.t_prev_delta
            self.t_prev_delta = now
            if prev:
                gap = now - prev
                i = 0
                while i < N_BOUNDS and gap > BOUNDS[i]:
                    i += 1
                self._counts[i] += 1
                self._sums[i] += gap
            else:
                self.t_first_delta = now

    cdef inline void scan(self, bytes chunk):
        cdef const char *p = PyBytes_AS_STRING(chunk)
        cdef Py_ssize_t n = PyBytes_GET_SIZE(chunk)
        cdef long long found
        if n == 0:
            return
        found = _pairs(p, n, b'\n')
        if memchr(p, b'\r', n) != NULL:
            found += _pairs(p, n, b'\r')
        if self.line_start and p[0] == b':':
            found += 1
        self.keepalives += found
        self.line_start = p[n - 1] == b'\n' or p[n - 1] == b'\r'

    @property
    def counts(self):
        return tuple([self._counts[i] for i in range(N_BUCKETS)])

    @property
    def sums(self):
        return tuple([self._sums[i] for i in range(N_BUCKETS)])

    def snapshot(self):
        return (self.events, self.deltas, self.t_pull, self.wait_ns, self.t_first_delta, self.t_prev_delta,
                self.keepalives, self.line_start, self.counts, self.sums)


cdef inline long long _pairs(const char *p, Py_ssize_t n, char first) noexcept:
    cdef long long found = 0
    cdef const char *end = p + n
    cdef const char *q
    while p < end:
        q = <const char *>memchr(p, first, end - p)
        if q == NULL or q + 1 >= end:
            break
        if q[1] == b':':
            found += 1
        p = q + 1
    return found


def keepalives(Acct a, bytes chunk):
    a.scan(chunk)


cdef class Observe:
    cdef object it
    cdef Acct acct
    cdef object on_end
    cdef int state

    def __init__(self, iterable, Acct acct, on_end):
        self.it = iter(iterable)
        self.acct = acct
        self.on_end = on_end

    def __iter__(self):
        return self

    def __next__(self):
        cdef Acct a = self.acct
        if self.state == 2:
            raise StopIteration
        self.state = 1
        try:
            a.t_pull = a.now()
            item = next(self.it)
            a.account(item, a.now())
            return item
        except StopIteration:
            self.state = 2
            self.on_end(a, None)
            raise
        except BaseException as exc:
            self.state = 2
            self.on_end(a, exc)
            raise

    def close(self):
        if self.state == 1:
            self.state = 2
            self.on_end(self.acct, GeneratorExit())
        self.state = 2
        close = getattr(self.it, "close", None)
        if close is not None:
            close()

    def __del__(self):
        if self.state == 1:
            self.close()


cdef class Reader:
    cdef object it
    cdef Acct acct

    def __init__(self, iterable, Acct acct):
        self.it = iter(iterable)
        self.acct = acct

    def __iter__(self):
        return self

    def __next__(self):
        chunk = next(self.it)
        self.acct.scan(chunk)
        return chunk


async def observe_async(agen, Acct a, on_end, whoami):
    try:
        a.pulling = whoami()
        a.t_pull = a.now()
        async for item in agen:
            a.pulling = None
            a.account(item, a.now())
            yield item
            a.pulling = whoami()
            a.t_pull = a.now()
    except BaseException as exc:
        on_end(a, exc)
        raise
    on_end(a, None)
