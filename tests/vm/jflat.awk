# Flattens a JSON document on stdin into one line per scalar:
#   path=value
# Object keys and array indexes are joined with '.', strings are printed
# without their quotes (escapes kept as written). Example:
#   {"units":[{"name":"api","pids":[12,13]}]}
# becomes
#   units.0.name=api
#   units.0.pids.0=12
#   units.0.pids.1=13
# Runs under busybox awk (the guest has no jq or python). Not a validator.
BEGIN { RS = "\001" }
{ doc = doc $0 }
END {
    s = doc; n = length(s); i = 1; depth = 0
    while (i <= n) {
        c = substr(s, i, 1)
        if (c == " " || c == "\t" || c == "\n" || c == "\r") { i++; continue }
        if (c == "{") { depth++; kind[depth] = "o"; key[depth] = ""; want_key[depth] = 1; i++; continue }
        if (c == "[") { depth++; kind[depth] = "a"; idx[depth] = 0; key[depth] = 0; i++; continue }
        if (c == "}" || c == "]") { depth--; i++; continue }
        if (c == ",") {
            if (kind[depth] == "a") { idx[depth]++; key[depth] = idx[depth] } else { want_key[depth] = 1 }
            i++; continue
        }
        if (c == ":") { want_key[depth] = 0; i++; continue }
        if (c == "\"") {
            j = i + 1; v = ""
            while (j <= n) {
                d = substr(s, j, 1)
                if (d == "\\") { v = v substr(s, j, 2); j += 2; continue }
                if (d == "\"") break
                v = v d; j++
            }
            i = j + 1
            if (kind[depth] == "o" && want_key[depth]) { key[depth] = v } else { emit(v) }
            continue
        }
        # number, true, false or null
        j = i
        while (j <= n && index(",}] \t\r\n", substr(s, j, 1)) == 0) j++
        emit(substr(s, i, j - i)); i = j
    }
}
function emit(v,    p, k) {
    p = ""
    for (k = 1; k <= depth; k++) p = p (k > 1 ? "." : "") key[k]
    print p "=" v
}
