-- The last SQL of the extension script, after every function exists.
--
-- No grid function is executable by PUBLIC: a DBA grants them function by
-- function (GRANT EXECUTE ON FUNCTION grid.ask(text) TO analyst, ...). The
-- auditors' role gets what it exists for.
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA grid FROM PUBLIC;
GRANT EXECUTE ON FUNCTION grid.verify_audit(text), grid.audit_head() TO grid_auditor;
