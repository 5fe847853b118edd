/* The C twin of wire/fastread.py's read (the compiled core only; wire/_core.py).

   event_string(chunk, first, mids, last) -> bytes | None | False

   The read fastread.read defines, for the usual case: the layout's steps over the raw
   bytes, then the string's UTF-8, unescaping JSON's escapes in one pass. It returns the
   bytes only where the definition returns the same bytes, and False (not decided here:
   the definition answers) for everything else: a read the layout does not match, a raw
   quote or control byte in the string, an escape that is not one of JSON's, a surrogate
   escape not in a valid pair, a string not bounded by quotes, bytes that are not valid
   UTF-8. It never returns None (a refusal is the definition's to make). No state; the
   arguments are only read. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

static inline int
hex4(const unsigned char *p, unsigned int *out)
{
    unsigned int v = 0;
    for (int k = 0; k < 4; k++) {
        unsigned char c = p[k];
        unsigned int d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if (c >= 'a' && c <= 'f')
            d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            d = c - 'A' + 10;
        else
            return 0;
        v = v * 16 + d;
    }
    *out = v;
    return 1;
}

/* bytes are valid UTF-8 (Python's strict decoder says so: the definition's own check) */
static int
valid_utf8(const char *s, Py_ssize_t n)
{
    PyObject *u = PyUnicode_DecodeUTF8(s, n, "strict");
    if (u == NULL) {
        PyErr_Clear();
        return 0;
    }
    Py_DECREF(u);
    return 1;
}

/* per byte of a string: 0 as it is, 1 a backslash, 2 a raw quote or control byte (not
   read here), 3 a byte >= 0x80 (UTF-8 to check) */
static unsigned char CLASS[256];
/* the byte of each one-letter escape (0: not one of JSON's) */
static unsigned char ESCAPE[256];

static void
tables(void)
{
    for (int b = 0; b < 256; b++)
        CLASS[b] = b < 0x20 || b == '"' ? 2 : b == '\\' ? 1 : b >= 0x80 ? 3 : 0;
    ESCAPE['"'] = '"';
    ESCAPE['\\'] = '\\';
    ESCAPE['/'] = '/';
    ESCAPE['b'] = '\b';
    ESCAPE['f'] = '\f';
    ESCAPE['n'] = '\n';
    ESCAPE['r'] = '\r';
    ESCAPE['t'] = '\t';
}

static PyObject *
undecided(void)
{
    Py_RETURN_FALSE;
}

static PyObject *
event_string(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 4 || !PyBytes_CheckExact(args[0]) || !PyBytes_CheckExact(args[1]) || !PyTuple_CheckExact(args[2])
        || !PyBytes_CheckExact(args[3]))
        return undecided();
    const unsigned char *c = (const unsigned char *)PyBytes_AS_STRING(args[0]);
    Py_ssize_t n = PyBytes_GET_SIZE(args[0]);
    Py_ssize_t nfirst = PyBytes_GET_SIZE(args[1]);
    Py_ssize_t nlast = PyBytes_GET_SIZE(args[3]);
    PyObject *mids = args[2];

    /* the layout: first, per integer hole its digits and the piece after them, last */
    if (nfirst > n || memcmp(c, PyBytes_AS_STRING(args[1]), (size_t)nfirst) != 0)
        return undecided();
    Py_ssize_t i = nfirst;
    Py_ssize_t nmids = PyTuple_GET_SIZE(mids);
    for (Py_ssize_t k = 0; k < nmids; k++) {
        PyObject *mid = PyTuple_GET_ITEM(mids, k);
        if (!PyBytes_CheckExact(mid))
            return undecided();
        Py_ssize_t j = i;
        while (j < n && c[j] >= '0' && c[j] <= '9')
            j++;
        if (j == i || j - i > 18 || (c[i] == '0' && j - i > 1))
            return undecided();
        Py_ssize_t nmid = PyBytes_GET_SIZE(mid);
        if (nmid > n - j || memcmp(c + j, PyBytes_AS_STRING(mid), (size_t)nmid) != 0)
            return undecided();
        i = j + nmid;
    }
    Py_ssize_t stop = n - nlast;
    if (stop < i || memcmp(c + stop, PyBytes_AS_STRING(args[3]), (size_t)nlast) != 0)
        return undecided();

    /* the string, c[i:stop], in one pass: runs of plain bytes scanned (and copied only once
       an escape is met), each escape written decoded into a buffer (it never grows) */
    Py_ssize_t len = stop - i;
    unsigned char small[512];
    unsigned char *o = NULL; /* the buffer, from the first escape on */
    PyObject *out = Py_False; /* not decided here, unless the pass ends */
    Py_ssize_t w = 0;
    int high = 0;
    Py_ssize_t j = i;
    Py_ssize_t run = i; /* the start of the plain run not yet copied */
    for (;;) {
        while (j < stop && CLASS[c[j]] == 0)
            j++;
        if (j >= stop)
            break;
        unsigned char t = CLASS[c[j]];
        if (t == 3) { /* a byte of a multi-byte sequence: its validity is checked at the end */
            high = 1;
            j++;
            continue;
        }
        if (t == 2) /* a raw quote or control byte: the definition decides */
            goto done;
        /* a backslash */
        if (o == NULL) {
            o = small;
            if (len > (Py_ssize_t)sizeof(small)) {
                o = (unsigned char *)PyMem_Malloc((size_t)len);
                if (o == NULL)
                    return PyErr_NoMemory();
            }
        }
        memcpy(o + w, c + run, (size_t)(j - run));
        w += j - run;
        if (j + 1 >= stop)
            goto done;
        unsigned char e = c[j + 1];
        if (e != 'u') {
            unsigned char v = ESCAPE[e];
            if (v == 0)
                goto done;
            o[w++] = v;
            j += 2;
            run = j;
            continue;
        }
        unsigned int cp;
        if (j + 6 > stop || !hex4(c + j + 2, &cp))
            goto done;
        j += 6;
        if (cp >= 0xDC00 && cp <= 0xDFFF)
            goto done; /* a lone low surrogate */
        if (cp >= 0xD800 && cp <= 0xDBFF) {
            unsigned int lo;
            if (j + 6 > stop || c[j] != '\\' || c[j + 1] != 'u' || !hex4(c + j + 2, &lo) || lo < 0xDC00 || lo > 0xDFFF)
                goto done; /* a high surrogate not followed by a low one */
            j += 6;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        if (cp < 0x80) {
            o[w++] = (unsigned char)cp;
        } else if (cp < 0x800) {
            o[w++] = (unsigned char)(0xC0 | (cp >> 6));
            o[w++] = (unsigned char)(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            o[w++] = (unsigned char)(0xE0 | (cp >> 12));
            o[w++] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
            o[w++] = (unsigned char)(0x80 | (cp & 0x3F));
        } else {
            o[w++] = (unsigned char)(0xF0 | (cp >> 18));
            o[w++] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
            o[w++] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
            o[w++] = (unsigned char)(0x80 | (cp & 0x3F));
        }
        run = j;
    }
    /* the raw bytes valid UTF-8 (escapes write whole sequences: the span's validity is the
       raw runs'); escapes only between the quotes the definition has orjson read */
    if (high && !valid_utf8((const char *)c + i, len))
        goto done;
    if (o == NULL) { /* no escape: the bytes as they are */
        out = PyBytes_FromStringAndSize((const char *)c + i, len);
        goto done;
    }
    if (i < 1 || c[i - 1] != '"' || stop >= n || c[stop] != '"')
        goto done;
    memcpy(o + w, c + run, (size_t)(stop - run));
    w += stop - run;
    out = PyBytes_FromStringAndSize((const char *)o, w);
done:
    if (o != NULL && o != small)
        PyMem_Free(o);
    if (out == Py_False)
        Py_INCREF(out);
    return out;
}

static PyMethodDef methods[] = {
    {"event_string", (PyCFunction)(void (*)(void))event_string, METH_FASTCALL,
     "event_string(chunk, first, mids, last): wire/fastread.py's read, or False where it does not decide"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fastread", "The C twin of wire/fastread.py's read (the compiled core only).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__fastread(void)
{
    tables();
    return PyModule_Create(&module);
}
