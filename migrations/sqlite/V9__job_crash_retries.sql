-- How many times a job was found `running` at startup, i.e. the process died while running
-- it. Past a bound the job is made `dead` instead of being run again (see src/jobs.rs), so an
-- input that kills the process cannot do so at every restart.
ALTER TABLE jobs ADD COLUMN crash_retries INTEGER NOT NULL DEFAULT 0;
