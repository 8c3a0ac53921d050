-- grid.policy: per-role policy on top of what GRANTs allow, in
-- grid_core::policy::Policy's JSON format (verbs, ban, insert/update/delete
-- tables). The mask of a role is the intersection of its privileges and its
-- policy row. Write verbs are opt-in (grid_core::Policy::for_asker): a role
-- without a row, or whose row lists no "verbs", is asked SELECTs only, whatever
-- its grants allow; a row that names INSERT, UPDATE or DELETE enables them.
--
-- Only the owner (the superuser who created the extension) and superusers write
-- it. A role reads its own row (the ask path runs as the caller); grid_auditor
-- reads every row.
CREATE TABLE grid.policy (
    role_name  text PRIMARY KEY,
    policy     jsonb NOT NULL CHECK (grid.check_policy(policy)),
    comment    text
);
COMMENT ON TABLE grid.policy IS 'Per-role policy (grid_core::policy::Policy as jsonb) on top of the role''s privileges: bans, DML targets, and the write verbs a role may be asked (none without a row).';

REVOKE ALL ON grid.policy FROM PUBLIC;
GRANT SELECT ON grid.policy TO PUBLIC;
ALTER TABLE grid.policy ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_row ON grid.policy FOR SELECT TO PUBLIC
    USING (role_name = current_user);
CREATE POLICY auditor_reads_all ON grid.policy FOR SELECT TO grid_auditor
    USING (true);

SELECT pg_catalog.pg_extension_config_dump('grid.policy', '');
