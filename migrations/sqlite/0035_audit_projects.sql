-- The project each audit row concerns, as a column: the readable audit (`gatehouse audit
-- --project`, the project activity page) filters on it. Filled from the `project=ID` part of
-- the detail, which every writer uses; earlier rows are filled the same way here.
ALTER TABLE audit_events ADD COLUMN project_id TEXT;
UPDATE audit_events
   SET project_id = CASE
       WHEN instr(substr(detail, instr(detail, 'project=') + 8), ' ') = 0
       THEN substr(detail, instr(detail, 'project=') + 8)
       ELSE substr(substr(detail, instr(detail, 'project=') + 8), 1,
                   instr(substr(detail, instr(detail, 'project=') + 8), ' ') - 1)
   END
 WHERE detail LIKE 'project=%' OR detail LIKE '% project=%';
CREATE INDEX audit_events_project ON audit_events (project_id, id);
