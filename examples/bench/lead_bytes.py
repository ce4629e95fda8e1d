#!/usr/bin/env python3
"""Bytes one lead costs: on disk (per table and index, from SQLite's dbstat) and in the WAL of
each create.

    examples/bench/lead_bytes.py [path/to/genied] [leads]     (defaults: target/debug, 100000)
    KEEP=1 examples/bench/lead_bytes.py ...   keeps the database (for EXPLAIN QUERY PLAN)

The schema is the real one: `genied migrate` makes the database. The writes replay, with
Python's sqlite3, the statements one `leads create` runs (db::leads::insert, db::leads::log
and the audit row of db::activities::insert in one transaction, as service::leads::create
does; SEPARATE_AUDIT=1: the audit row in a second one, as before; since V33 the lead's "created"
log entry is two columns of its row, not a lead_activities row), and the search indexer's batch every 500 creates (when the schema has one;
since V48 with its merge steps), with
the service's pragmas and no automatic checkpoint, so that the WAL of 1,000 creates at steady
state can be measured. Typical lead: name, email, phone, status, priority.
Then the WAL frames of 100 more creates, by the table or index each frame is a page of.
It prints figures; it never fails on them.
"""
import collections, datetime, os, random, shutil, sqlite3, struct, subprocess, sys, tempfile, uuid

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
target = os.environ.get('CARGO_TARGET_DIR', os.path.join(root, 'target'))
binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(target, 'debug', 'genied')
n = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
measured = 1_000
# SEPARATE_AUDIT=1: the audit row in a second transaction, as before the audit row joined the
# create's own transaction (issue #16, round two).
SEPARATE_AUDIT = os.environ.get('SEPARATE_AUDIT') == '1'

work = tempfile.mkdtemp(prefix='genied-lead-bytes.')
subprocess.run([binary, '--data-dir', work, 'migrate'], check=True, stdout=subprocess.DEVNULL)
path = os.path.join(work, 'genied.db')
c = sqlite3.connect(path, isolation_level=None)
if sqlite3.sqlite_version_info < (3, 41):
    # Since V41 `users.key` and `genies.key` are made with `unhex` (SQLite 3.41).
    c.create_function('unhex', 1, lambda h: None if h is None else bytes.fromhex(h), deterministic=True)
for p in ['journal_mode = WAL', 'synchronous = NORMAL', 'wal_autocheckpoint = 0', 'foreign_keys = OFF']:
    c.execute('PRAGMA ' + p)

random.seed(1)
first = ['Ada', 'Grace', 'Alan', 'Linus', 'Margaret', 'Dennis', 'Barbara', 'Ken', 'Frances', 'John']
last = ['Lovelace', 'Hopper', 'Turing', 'Torvalds', 'Hamilton', 'Ritchie', 'Liskov', 'Thompson', 'Allen', 'Backus']
user, genie = str(uuid.uuid4()), str(uuid.uuid4())
t0 = datetime.datetime(2026, 1, 1)
# The genie exists (foreign keys are off, but triggers look the lead's genie up: since V34
# the owner's counts follow every create).
c.execute('INSERT INTO genies (id, user_id, name, name_lower, llm_model, created_at, updated_at)'
          ' VALUES (?, ?, ?, ?, ?, ?, ?)',
          (genie, user, 'Sales', 'sales', 'gpt-4o-mini', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z'))


def create(i):
    fn, ln = random.choice(first), random.choice(last)
    ts = (t0 + datetime.timedelta(seconds=i * 7)).isoformat(timespec='milliseconds') + 'Z'
    ts_ms = int((t0 + datetime.timedelta(seconds=i * 7)).replace(tzinfo=datetime.timezone.utc).timestamp() * 1000)
    c.execute('BEGIN IMMEDIATE')
    # Since V40 a lead's times are milliseconds since the epoch.
    lead_ts = ts_ms if lead_ms else ts
    # Since V41 a lead keeps its genie and user as 16-byte keys.
    keys = (uuid.UUID(genie).bytes, uuid.UUID(user).bytes) if lead_keys else (genie, user)
    values = keys + (f'{fn} {ln}', f'{fn.lower()}.{ln.lower()}{i}@example.com', f'+1555{i:07d}', 'new', 'medium', lead_ts, lead_ts)
    if created_on_row:
        # Since V33 the "created" log entry is two columns of the lead row: its id, taken from
        # lead_activities' sequence (db::leads::next_activity_id), and who created the lead.
        # (Without RETURNING since round twenty: an UPDATE, then a SELECT.)
        if c.execute("UPDATE sqlite_sequence SET seq = seq + 1 WHERE name = 'lead_activities'").rowcount == 0:
            c.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('lead_activities', 1)")
        entry = c.execute("SELECT seq FROM sqlite_sequence WHERE name = 'lead_activities'").fetchone()
        lead = c.execute(
            'INSERT INTO leads (agent_id, user_id, name, email, phone, status, priority, created_at, updated_at,'
            ' created_log_id, created_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
            # Since V38 a lead's creator is stored only when it is not the lead's user.
            values + (entry[0], None if creator_when_other else user),
        ).lastrowid
    else:
        lead = c.execute(
            'INSERT INTO leads (agent_id, user_id, name, email, phone, status, priority, created_at, updated_at)'
            ' VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
            values,
        ).lastrowid
        c.execute(
            'INSERT INTO lead_activities (lead_id, user_id, type, description, metadata, created_at) VALUES (?, ?, ?, ?, ?, ?)',
            (lead, user, 'created', 'Lead created', None, ts),
        )
    if SEPARATE_AUDIT:
        c.execute('COMMIT')
        c.execute('BEGIN IMMEDIATE')
    if compact_audit:
        # Since V37 the audit row keeps its ids as 16 bytes and its time as milliseconds.
        audit_ids = (uuid.uuid4().bytes, uuid.UUID(user).bytes)
        audit_ts = ts_ms
    else:
        audit_ids, audit_ts = (str(uuid.uuid4()), user), ts
    c.execute(
        'INSERT INTO activities (id, user_id, resource, action, record_id, summary, ip, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
        audit_ids + ('leads', 'create', str(lead), f'created lead {fn} {ln}', '127.0.0.1', audit_ts),
    )
    c.execute('COMMIT')


pending = c.execute("SELECT 1 FROM sqlite_schema WHERE name = 'leads_search_pending'").fetchone()
created_on_row = any(r[1] == 'created_log_id' for r in c.execute('PRAGMA table_info(leads)'))
creator_when_other = c.execute("SELECT 1 FROM refinery_schema_history WHERE name = 'lead_creator'").fetchone() is not None
lead_ms = any(r[1] == 'created_at' and r[2] == 'INTEGER' for r in c.execute('PRAGMA table_info(leads)'))
lead_keys = any(r[1] == 'user_id' and r[2] == 'BLOB' for r in c.execute('PRAGMA table_info(leads)'))
compact_audit = any(r[1] == 'id' and r[2] == 'BLOB' for r in c.execute('PRAGMA table_info(activities)'))


watermark = c.execute("SELECT 1 FROM sqlite_schema WHERE name = 'leads_search_state'").fetchone()
step_merges = c.execute("SELECT v FROM leads_search_config WHERE k = 'automerge'").fetchone() == (0,)


def index_pending():
    # What service::leads::search_indexer does (db::leads::index_pending), in one transaction.
    c.execute('BEGIN IMMEDIATE')
    if watermark:
        # Since V39 new leads are those past the watermark; no create lists them as pending.
        w = c.execute('SELECT indexed_to FROM leads_search_state WHERE id = 1').fetchone()[0]
        to = c.execute('SELECT MAX(id) FROM leads WHERE id > ?', (w,)).fetchone()[0]
        if to is not None:
            c.execute('INSERT INTO leads_search (rowid, name, email, phone)'
                      ' SELECT id, name, email, phone FROM leads WHERE id > ? AND id <= ?', (w, to))
            c.execute('UPDATE leads_search_state SET indexed_to = ? WHERE id = 1', (to,))
    last = c.execute('SELECT MAX(lead_id) FROM leads_search_pending').fetchone()[0]
    if last is not None:
        c.execute('INSERT INTO leads_search (rowid, name, email, phone) SELECT l.id, l.name, l.email, l.phone'
                  ' FROM leads l WHERE l.id IN (SELECT lead_id FROM leads_search_pending WHERE lead_id <= ?)',
                  (last,))
        c.execute('DELETE FROM leads_search_pending WHERE lead_id <= ?', (last,))
    c.execute('COMMIT')
    # Since V48 FTS5 merges only when asked: the indexer's steps, each a transaction.
    while step_merges:
        c.execute('BEGIN IMMEDIATE')
        before = c.total_changes
        c.execute("INSERT INTO leads_search (leads_search, rank) VALUES ('merge', 16)")
        c.execute('COMMIT')
        if c.total_changes - before < 2:
            break


def run(lo, hi):
    for i in range(lo, hi):
        create(i)
        # The indexer runs every half second: about 500 creates at 1,000 a second.
        if pending and (i + 1) % 500 == 0:
            index_pending()


run(0, n)
c.execute('PRAGMA wal_checkpoint(TRUNCATE)')
run(n, n + measured)
wal = os.path.getsize(path + '-wal')
c.execute('PRAGMA wal_checkpoint(TRUNCATE)')
total = n + measured
print(f'{total} leads, page size {c.execute("PRAGMA page_size").fetchone()[0]} bytes')
print(f'WAL per create (lead, its activity and the audit row{", the audit row in its own transaction" if SEPARATE_AUDIT else ""}): {wal / measured:,.0f} bytes'
      f' ({wal / measured / (c.execute("PRAGMA page_size").fetchone()[0] + 24):.1f} frames)')
rows = c.execute('SELECT name, SUM(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC').fetchall()
audit = {'activities', 'activities_user_time', 'activities_time', 'sqlite_autoindex_activities_1'}
per = lambda names: sum(b for name, b in rows if name in names) / total
lead_names = {name for name, _ in rows if name.startswith(('leads', 'lead_activities', 'lead_status_counts', 'lead_owner_counts'))}
print(f'database file: {os.path.getsize(path) / total:,.0f} bytes per lead in all;'
      f' the lead itself (row, indexes, search, its activity log) {per(lead_names):,.0f};'
      f' the audit row {per(audit):,.0f}')
for name, b in rows:
    if b / total >= 1:
        print(f'  {name:34s} {b / total:7.1f} bytes per lead')

# Which b-trees the WAL frames of a create are pages of: each frame is one whole page
# written, so a create's WAL is pages touched (and split), not bytes changed.
c.execute('PRAGMA wal_checkpoint(TRUNCATE)')
sample = 100
run(total + 10, total + 10 + sample)
page_size = c.execute('PRAGMA page_size').fetchone()[0]
owner = {page: name for name, page in c.execute('SELECT name, pageno FROM dbstat')}
frames = collections.Counter()
with open(path + '-wal', 'rb') as f:
    wal_bytes = f.read()
for off in range(32, len(wal_bytes) - 23, 24 + page_size):  # 32-byte header; 24 per frame
    page = struct.unpack('>I', wal_bytes[off:off + 4])[0]
    frames[owner.get(page, 'other (freelist, new pages)')] += 1
print(f'WAL frames per create, by b-tree ({sample} creates, no indexer batch among them):'
      f' {sum(frames.values()) / sample:.1f}')
for name, n_frames in frames.most_common():
    print(f'  {name:34s} {n_frames / sample:5.2f}')
c.close()
if os.environ.get('KEEP'):
    print(f'kept: {path}')
else:
    shutil.rmtree(work)
