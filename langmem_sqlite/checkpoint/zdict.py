"""The preset dictionary of the checkpointer's compressed values (type suffix `+zd`).

Most stored values are small: one message in a pending write or a list delta (300-600
bytes), a checkpoint's record (about 230). Compressed alone they shrink by a quarter at most:
each repeats the serializer's framing (`langchain_core.messages.ai`, `additional_kwargs`,
`response_metadata`...) that zlib has not seen yet. Deflate with a preset dictionary holding
that framing takes them to about 40% of their size (a chat graph's messages: 0.42 with English
text, 0.39 with the benchmark's).

The bytes below were made once from LangChain's and LangGraph's msgpack output of typical
messages, metadata and records, and some frequent English words (the most useful last, where
deflate's distances are shortest). **They must never change:** every row compressed with them
needs them to be read. A better dictionary would get a new suffix and a new constant; this one
stays for the rows that use it.
"""

ZDICT_V1 = (
    b"the of and to in a is that for it as was with be by on not h"
    b"e this are or his from at which but have an they you were he"
    b"r she there been one all we their has would when if so what "
    b"can more about will no up out into do than some could them o"
    b"nly other its then also these two may first any my now such "
    b"like our over me even most how after where your should throu"
    b"gh because each just those people between well much good ver"
    b"y make how use user assistant please thanks question answer "
    b"tool function result error data file code\x8b\xa6source\xa5input\xa4step"
    b"\xff\xa7parents\x80\xa6run_id\xa0\xa7user_id\xa0\xa9thread_id\xa0\xaelanggraph_step\x01\xaelangg"
    b"raph_node\xa0\xb2langgraph_triggers\x90\xaelanggraph_path\x90\xb7langgraph_che"
    b"ckpoint_ns\xa0\x84\xa1v\x04\xa2ts\xd9 2026-01-01T00:00:00.000000+00:00\xadversion"
    b"s_seen\x82\xa9__input__\x80\xa9__start__\x81\xa9__start__\xb9000000000001.0000000"
    b"00000\xb0updated_channels\x95\xa8messages\xa9__start__\xaabranch:to:\xad__inte"
    b"rrupt__\xae__pregel_tasks\x91\xc7\x88\x05\x94\xbelangchain_core.messages.system\xadS"
    b"ystemMessage\x86\xa7content\xa0\xb1additional_kwargs\x80\xb1response_metadata\x80"
    b"\xa4type\xa6system\xa4name\xc0\xa2id\xa0\xb3model_validate_json\x91\xc7\xae\x05\x94\xbclangchain_co"
    b"re.messages.tool\xabToolMessage\x89\xa7content\xa0\xb1additional_kwargs\x80\xb1re"
    b"sponse_metadata\x80\xa4type\xa4tool\xa4name\xa0\xa2id\xa0\xactool_call_id\xa5call_\xa8arti"
    b"fact\xc0\xa6status\xa7success\xb3model_validate_json\x91\xc8\x02\n\x05\x94\xbalangchain_cor"
    b"e.messages.ai\xa9AIMessage\x89\xa7content\xa0\xb1additional_kwargs\x80\xb1respons"
    b"e_metadata\x88\xaamodel_name\xabgpt-4o-mini\xadfinish_reason\xa4stop\xabtoken_"
    b"usage\x83\xb1completion_tokens\x01\xadprompt_tokens\x01\xactotal_tokens\x02\xb2syste"
    b"m_fingerprint\xa3fp_\xaemodel_provider\xa6openai\xa2id\xa9chatcmpl-\xacservice"
    b"_tier\xa7default\xa8logprobs\xc0\xa4type\xa2ai\xa4name\xc0\xa2id\xa5run--\xaatool_calls\x91\x84\xa4"
    b"name\xa0\xa4args\x81\xa5query\xa0\xa2id\xa5call_\xa4type\xa9tool_call\xb2invalid_tool_call"
    b"s\x90\xaeusage_metadata\x85\xacinput_tokens\x01\xadoutput_tokens\x01\xactotal_tokens"
    b"\x02\xb3input_token_details\x81\xaacache_read\x00\xb4output_token_details\x81\xa9rea"
    b"soning\x00\xb3model_validate_json\x81\xa8messages\x91\xc7\x85\x05\x94\xbdlangchain_core.me"
    b"ssages.human\xacHumanMessage\x86\xa7content\xa0\xb1additional_kwargs\x80\xb1respo"
    b"nse_metadata\x80\xa4type\xa5human\xa4name\xc0\xa2id\xc0\xb3model_validate_json\x91\xc7\x85\x05\x94\xbd"
    b"langchain_core.messages.human\xacHumanMessage\x86\xa7content\xa0\xb1additio"
    b"nal_kwargs\x80\xb1response_metadata\x80\xa4type\xa5human\xa4name\xc0\xa2id\xa0\xb3model_va"
    b"lidate_json\x91\xc7\xb1\x05\x94\xbalangchain_core.messages.ai\xa9AIMessage\x89\xa7conte"
    b"nt\xa0\xb1additional_kwargs\x80\xb1response_metadata\x80\xa4type\xa2ai\xa4name\xc0\xa2id\xa5r"
    b"un--\xaatool_calls\x90\xb2invalid_tool_calls\x90\xaeusage_metadata\xc0\xb3model_v"
    b"alidate_json"
)
"""Version 1 of the dictionary (2172 bytes)."""

ZDICT_V1_SHA256 = "f2bc8c6811c854fc71e7023f8c670b0278d3de684d64e5e9d0b18d994dfce707"
"""Its digest, checked by the tests: a change would make stored rows unreadable."""
