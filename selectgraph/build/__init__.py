"""Build: declaring a graph — AgentGraph, GraphSpec and LangGraph's spellings."""
