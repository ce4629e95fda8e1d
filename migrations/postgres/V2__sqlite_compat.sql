-- SQLite's functions that db/ statements use, defined in PostgreSQL with the same names and
-- meaning (for the values genied stores), so that those statements run unchanged on both
-- engines instead of branching per engine. JSON columns are TEXT on both.

-- Whether text is JSON (SQLite: json_valid).
CREATE FUNCTION json_valid(t TEXT) RETURNS BOOLEAN IMMUTABLE LANGUAGE plpgsql AS $$
BEGIN
    IF t IS NULL THEN
        RETURN NULL;
    END IF;
    PERFORM t::jsonb;
    RETURN TRUE;
EXCEPTION WHEN others THEN
    RETURN FALSE;
END $$;

-- The value at a `$.a.b` path as text (SQLite: json_extract; NULL where SQLite would fail).
CREATE FUNCTION json_extract(t TEXT, path TEXT) RETURNS TEXT IMMUTABLE LANGUAGE plpgsql AS $$
BEGIN
    RETURN (t::jsonb) #>> string_to_array(substr(path, 3), '.');
EXCEPTION WHEN others THEN
    RETURN NULL;
END $$;

-- SQLite's json(x) marks text as JSON for json_set / json_insert; in PostgreSQL the same
-- words are a cast to the json type (for a literal) or this function (for a parameter),
-- and the two functions below take json.
CREATE FUNCTION json(t TEXT) RETURNS JSON IMMUTABLE LANGUAGE sql AS $$
    SELECT t::json
$$;

CREATE FUNCTION json_array_length(t TEXT) RETURNS BIGINT IMMUTABLE LANGUAGE sql AS $$
    SELECT json_array_length(t::json)::bigint
$$;

-- json_set(doc, '$.key', json(value)): sets one top-level or nested key.
CREATE FUNCTION json_set(t TEXT, path TEXT, v JSON) RETURNS TEXT IMMUTABLE LANGUAGE sql AS $$
    SELECT jsonb_set(COALESCE(t, '{}')::jsonb, string_to_array(substr(path, 3), '.'), v::jsonb, true)::text
$$;

-- json_insert(array, '$[#]', json(value)): appends to an array (the only form used).
CREATE FUNCTION json_insert(t TEXT, path TEXT, v JSON) RETURNS TEXT IMMUTABLE LANGUAGE plpgsql AS $$
BEGIN
    IF path <> '$[#]' THEN
        RAISE EXCEPTION 'json_insert: only $[#] is supported, not %', path;
    END IF;
    RETURN (COALESCE(t, '[]')::jsonb || jsonb_build_array(v::jsonb))::text;
END $$;

-- The elements of a JSON array or object as (key, value) text rows (SQLite: json_each).
CREATE FUNCTION json_each(t TEXT) RETURNS TABLE (key TEXT, value TEXT) IMMUTABLE LANGUAGE sql AS $$
    SELECT NULL::text, e FROM json_array_elements_text(
        CASE WHEN json_typeof(t::json) = 'array' THEN t::json ELSE '[]'::json END) AS e
    UNION ALL
    SELECT k, v FROM json_each_text(
        CASE WHEN json_typeof(t::json) = 'object' THEN t::json ELSE '{}'::json END) AS o(k, v)
$$;

-- Position of b in a, 1-based, 0 when absent (SQLite: instr).
CREATE FUNCTION instr(a TEXT, b TEXT) RETURNS BIGINT IMMUTABLE LANGUAGE sql AS $$
    SELECT strpos(a, b)::bigint
$$;

-- The function genied registers on every SQLite connection (db::leads::register_functions).
CREATE FUNCTION genied_icontains(hay TEXT, needle TEXT) RETURNS BOOLEAN IMMUTABLE LANGUAGE sql AS $$
    SELECT hay IS NOT NULL AND strpos(lower(hay), lower(needle)) > 0
$$;

-- SQLite's TOTAL(): a float sum that is 0.0, not NULL, over no rows.
CREATE FUNCTION genied_total_step(s DOUBLE PRECISION, v DOUBLE PRECISION) RETURNS DOUBLE PRECISION
IMMUTABLE LANGUAGE sql AS $$
    SELECT s + COALESCE(v, 0)
$$;
CREATE AGGREGATE total(DOUBLE PRECISION) (SFUNC = genied_total_step, STYPE = DOUBLE PRECISION, INITCOND = '0');

-- Days since noon in Greenwich on November 24, 4714 B.C., of an RFC 3339 time or 'now'
-- (SQLite: julianday), for durations computed in SQL.
CREATE FUNCTION julianday(t TEXT) RETURNS DOUBLE PRECISION STABLE LANGUAGE sql AS $$
    SELECT extract(epoch FROM t::timestamptz)::double precision / 86400.0 + 2440587.5
$$;
