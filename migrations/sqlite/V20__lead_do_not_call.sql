-- A lead who asked not to be called: every outbound call (genie `call`, campaigns) refuses it.
ALTER TABLE leads ADD COLUMN do_not_call INTEGER NOT NULL DEFAULT 0;
