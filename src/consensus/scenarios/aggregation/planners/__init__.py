"""The aggregation robots' planners: the LLM planner (paper 1's prompts) and the classical ones, built by
``factory``."""
