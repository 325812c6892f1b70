"""Crisis triage: L0 keyword gate, L1/L2 assessments, double confirmation, resources, alerts."""
