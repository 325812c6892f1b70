"""Model routes, providers, structured output, the offline engine and the simulator."""
